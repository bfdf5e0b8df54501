"""``minipt export`` for every family with a Hugging Face layout, with its tokenizer.

Each case is a run folder as ``minipt train`` leaves it (``checkpoint.npz`` + ``tokenizer.json``,
a random model whose every parameter is perturbed, with the tokenizer its preset trains),
exported through the CLI. Without torch: the files, the config.json, the tokenizer files
read back by the ``tokenizers`` library with minipt's ids, and the one-line refusal of
every family without a layout. With torch and transformers: the folder loads through
transformers' classes and ``AutoTokenizer``, the tokenizer gives minipt's ids, and the
logits agree (float32 model: rtol 1e-4, atol 1e-5). ``test_trained_runs_export`` does the
same for real ``minipt train MODEL --steps 2`` runs of BERT, T5, BART, XLNet and the Transformer.
"""
import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pytest

from minipt.cli import main
from minipt.core.checkpoint import save_checkpoint
from minipt.interop.pretrained import EXPORTABLE
from minipt.models import registry
from minipt.models.encoder.roberta import RobertaTokenizer
from minipt.tokenizers import CharTokenizer, WordPieceTokenizer, WordTokenizer
from minipt.tokenizers.byte_bpe import ByteBPETokenizer
from minipt.tokenizers.hf_files import WHITESPACE, special_roles
from minipt.tokenizers.special import (
    BERT_SPECIALS,
    BOS,
    CLS,
    ENDOFTEXT,
    EOS,
    MASK,
    PAD,
    SEP,
    UNK,
    t5_sentinels,
)

CORPUS = ("the cat sat on the mat . the dog sat on the log , and the cat saw the dog ; "
          "a bird sang in the tree . the mat was red and the log was old") * 3 + "\n\tthe end .\n"
TEXT = "The cat saw a bird on the red mat, and a zebra ; the dog sang."     # 'zebra': unknown to the word models
TEXTS = {"char": "the cat sat on a mat.\nthe dog\tsaw the log", "word": TEXT, "wordpiece": TEXT + " [MASK] café",
         "bpe": TEXT + " <mask> naïve 你好", "roberta": TEXT + " [MASK] naïve [SEP]"}


def tokenizer(kind: str):
    if kind == "char":
        return CharTokenizer().fit(CORPUS)
    if kind == "word":                                # the text-to-text tokenizer (data/text_to_text.py)
        return WordTokenizer(specials=(PAD, BOS, EOS, MASK, *t5_sentinels(3)), unk_token="<unk>").fit(CORPUS)
    if kind == "wordpiece":
        return WordPieceTokenizer(BERT_SPECIALS).fit(CORPUS, 60)
    if kind == "roberta":
        return RobertaTokenizer((CLS, PAD, SEP, UNK, MASK)).fit(CORPUS, 30)
    return ByteBPETokenizer([ENDOFTEXT]).fit(CORPUS, 30)


# registry name -> (tokenizer kind, settings beyond the registry's tiny model)
CASES = {"gpt": ("char", {}), "gpt1": ("char", {}), "llama": ("char", {}), "dialogpt": ("word", {}),
         "gpt-bpe": ("bpe", {}), "xlnet": ("char", {}), "bert": ("wordpiece", {}), "albert": ("wordpiece", {}),
         "electra": ("wordpiece", {}), "roberta": ("roberta", {}), "t5": ("word", {}), "bart": ("word", {}),
         "mass": ("word", {}), "transformer": ("word", {})}


def spec_for(name: str, tok) -> dict:
    family = "gpt" if name == "gpt-bpe" else name
    model, _ = registry.get(family).tiny()
    spec = {**model.spec(), "vocab_size": tok.vocab_size}
    if family in ("bart", "mass"):
        ids = tok.special_tokens
        spec.update(pad_id=ids[PAD], eos_id=ids[EOS], decoder_start_id=ids[MASK if family == "mass" else BOS])
        spec.update({"mask_id": ids[MASK]} if family == "mass" else {})
    if family in ("t5",):
        spec.update(pad_id=tok.special_tokens[PAD])
    if family in ("transformer",):
        spec.update(pad_id=tok.special_tokens[PAD], src_vocab_size=tok.vocab_size, d_model=16, n_head=4, d_ff=24)
    if family in ("gpt", "gpt1", "llama", "dialogpt", "t5", "bart", "mass", "transformer"):
        spec.update({k: 32 for k in ("block_size", "max_source_len", "max_target_len", "max_positions") if k in spec})
    if family in ("bert", "albert", "electra", "roberta"):
        spec["max_position"] = 40
    return spec


def run_folder(root: Path, name: str) -> tuple[Path, object, object]:
    """A run folder (checkpoint.npz + tokenizer.json) of a perturbed random ``name`` model."""
    kind = CASES[name][0]
    tok = tokenizer(kind)
    model = registry.build(spec_for(name, tok), rng=np.random.default_rng(0), dtype=np.float32)
    rng = np.random.default_rng(1)
    for _, p in model.named_parameters():
        p[...] = rng.normal(1.0 if p.ndim == 1 else 0.0, 0.2, p.shape)
    run = root / f"run-{name}"
    run.mkdir()
    save_checkpoint(run / "checkpoint.npz", model, config=model.spec())
    tok.save(run / "tokenizer.json")
    return run, model, tok


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """name -> (run, export folder, minipt model, minipt tokenizer, the CLI's note)."""
    root = tmp_path_factory.mktemp("export")
    out = {}
    for name in CASES:
        run, model, tok = run_folder(root, name)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            assert main(["export", "--checkpoint", str(run), "--to", str(root / f"hf-{name}")]) == 0
        out[name] = (run, root / f"hf-{name}", model, tok, printed.getvalue())
    return out


def folders(name: str, hf: Path) -> list[Path]:
    return [hf / "discriminator", hf / "generator"] if name == "electra" else [hf]


# -- without torch ---------------------------------------------------------------------------
TOKENIZER_FILES = {"char": ["tokenizer.json", "tokenizer_config.json", "minipt_tokenizer.json"],
                   "word": ["tokenizer.json", "tokenizer_config.json", "minipt_tokenizer.json"],
                   "wordpiece": ["tokenizer_config.json", "vocab.txt", "minipt_tokenizer.json"],
                   "roberta": ["merges.txt", "tokenizer_config.json", "vocab.json"],
                   "bpe": ["merges.txt", "tokenizer_config.json", "vocab.json"]}


@pytest.mark.parametrize("name", list(CASES))
def test_export_writes_model_and_tokenizer_files(name, exports):
    run, hf, model, tok, note = exports[name]
    for folder in folders(name, hf):
        files = sorted(p.name for p in folder.iterdir())
        assert files == sorted(["config.json", "model.safetensors", *TOKENIZER_FILES[CASES[name][0]]]), files
        config = json.loads((folder / "config.json").read_text())
        assert config["vocab_size"] == tok.vocab_size
        tconf = json.loads((folder / "tokenizer_config.json").read_text())
        if model.block_size is not None:
            assert tconf["model_max_length"] == model.block_size
    assert "AutoTokenizer" in note and "\n" not in note.strip()


def test_wordpiece_files_say_bert_tokenizer_and_its_special_tokens(exports):
    _, hf, _, tok, _ = exports["bert"]
    assert (hf / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1] == \
        [tok.id_to_token(i) for i in range(tok.vocab_size)]
    c = json.loads((hf / "tokenizer_config.json").read_text())
    assert c["tokenizer_class"] == "BertTokenizer" and c["do_lower_case"] is True
    assert (c["pad_token"], c["unk_token"], c["cls_token"], c["sep_token"], c["mask_token"]) == BERT_SPECIALS


def test_seq2seq_config_names_the_tokenizers_ends(exports):
    _, hf, _, tok, _ = exports["t5"]
    config = json.loads((hf / "config.json").read_text())
    assert config["eos_token_id"] == tok.token_to_id(EOS) and config["pad_token_id"] == tok.token_to_id(PAD)
    tconf = json.loads((hf / "tokenizer_config.json").read_text())
    assert (tconf["pad_token"], tconf["eos_token"], tconf["bos_token"], tconf["unk_token"]) == (PAD, EOS, BOS, "<unk>")
    assert tconf["mask_token"] == MASK and tconf["additional_special_tokens"] == t5_sentinels(3)


def test_whitespace_class_is_pythons():
    assert set(WHITESPACE.replace("\u2000-\u200a", "")) | {chr(c) for c in range(0x2000, 0x200B)} == \
        {chr(c) for c in range(0x110000) if chr(c).isspace()}


@pytest.mark.parametrize("name", ["gpt", "dialogpt", "t5"])
def test_tokenizers_library_reads_the_tokenizer_json_with_minipts_ids(name, exports):
    tokenizers = pytest.importorskip("tokenizers")
    _, hf, _, tok, _ = exports[name]
    theirs = tokenizers.Tokenizer.from_file(str(hf / "tokenizer.json"))
    kind = CASES[name][0]
    texts = [TEXTS[kind], TEXTS[kind] + " <s>the</s>[PAD]" if kind == "word" else TEXTS[kind] + "\n\nthe\tcat",
             "the\x1ccat  ,,dog_2 ", "THE Cat"]
    for text in texts:
        try:
            ours = tok.encode(text)
        except ValueError:                            # a character the char tokenizer never saw
            with pytest.raises(Exception):
                theirs.encode(text, add_special_tokens=False)
            continue
        assert theirs.encode(text, add_special_tokens=False).ids == ours, text


def test_lowercasing_word_tokenizer_says_so(tmp_path):
    from minipt.tokenizers.hf_files import tokenizer_json
    tokenizers = pytest.importorskip("tokenizers")
    tok = WordTokenizer(lowercase=True).fit(CORPUS)
    (tmp_path / "tokenizer.json").write_text(json.dumps(tokenizer_json(tok)))
    theirs = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    assert theirs.encode("The CAT, Sat", add_special_tokens=False).ids == tok.encode("The CAT, Sat")


REFUSED = ("ngram", "nnlm", "glove", "word2vec", "lstm", "elmo", "gpt1-finetune", "bert-classify", "bert-qa",
           "bert-tag", "prefixlm", "unilm", "glm", "ernie", "transe", "vilbert", "visualbert")


def test_every_registered_model_exports_or_is_refused():
    exported = {"gpt" if n == "gpt-bpe" else n for n in CASES} | {"gpt3"}     # gpt3: its sparse layers, by config
    assert set(EXPORTABLE) == exported
    assert {e.name for e in registry.entries()} == exported | set(REFUSED)


@pytest.mark.parametrize("name", REFUSED)
def test_family_without_a_layout_is_refused_in_one_line(name, tmp_path):
    from minipt.interop import save_pretrained
    model, _ = registry.get(name).tiny()
    with pytest.raises(ValueError, match=f"^{name} .* has no Hugging Face layout: ") as e:
        save_pretrained(model, tmp_path / "hf")
    assert "\n" not in str(e.value) and not (tmp_path / "hf").exists()


def tiny_run(root: Path, family: str, tok) -> Path:
    """A run folder holding the registry's tiny ``family`` model, sized to ``tok``."""
    model = registry.build({**registry.get(family).tiny()[0].spec(), "vocab_size": tok.vocab_size})
    run = root / "run"
    run.mkdir()
    save_checkpoint(run / "checkpoint.npz", model, config=model.spec())
    tok.save(run / "tokenizer.json")
    return run


def test_cli_refuses_a_run_without_a_layout(tmp_path, capsys):
    run = tiny_run(tmp_path, "prefixlm", WordTokenizer().fit("a b c d e f g h"))
    assert main(["export", "--checkpoint", str(run), "--to", str(tmp_path / "hf")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "prefixlm" in err and "no Hugging Face layout" in err
    assert "causally inside the prefix" in err and not (tmp_path / "hf").exists()


def test_export_into_a_non_empty_folder_needs_overwrite(exports, capsys):
    run, hf, _, _, _ = exports["t5"]
    before = {p.name: p.read_bytes() for p in hf.iterdir()}
    assert main(["export", "--checkpoint", str(run), "--to", str(hf)]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in hf.iterdir()} == before
    assert main(["export", "--checkpoint", str(run), "--to", str(hf), "--overwrite"]) == 0
    assert {p.name: p.read_bytes() for p in hf.iterdir()} == before       # the same export, the same bytes


# -- with torch and transformers ---------------------------------------------------------------
def ours_and_theirs(name: str, hf: Path, model, ids: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """(minipt's, transformers') logits of ``ids`` (1, T) for the family's head(s)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from minipt.core.module import eval_mode
    t = torch.tensor(ids)
    model.eval()
    with torch.no_grad(), eval_mode(model):
        if name in ("gpt", "gpt1", "llama", "dialogpt", "gpt-bpe"):
            theirs = transformers.AutoModelForCausalLM.from_pretrained(hf).eval()
            return [(model(ids)[1], theirs(input_ids=t).logits.numpy())]
        if name == "xlnet":
            theirs = transformers.XLNetLMHeadModel.from_pretrained(hf).eval()
            _, query = model.masks(None, 1, ids.shape[1])              # left to right: may-attend (1, T, T)
            T = ids.shape[1]
            out = theirs(input_ids=t, perm_mask=torch.tensor(1.0 - query, dtype=torch.float32),
                         target_mapping=torch.eye(T)[None], use_mems=False).logits.numpy()
            # the first position sees no token: minipt gives that empty row a zero attention
            # output, transformers' -1e30 masking spreads it evenly (models/unified/xlnet.py)
            return [(model(ids)[1][:, 1:], out[:, 1:])]
        if name in ("bert", "albert", "roberta"):
            theirs = (transformers.AutoModelForMaskedLM if name == "roberta"
                      else transformers.AutoModelForPreTraining).from_pretrained(hf).eval()
            out = theirs(input_ids=t)
            if name == "roberta":
                return [(model.outputs(ids).logits, out.logits.numpy())]
            mine = model.outputs(ids, None, None, None, None)
            pair = out.seq_relationship_logits if name == "bert" else out.sop_logits
            # NSP / SOP: minipt's label 1 (IsNext, in order) is transformers' 0; export swaps the rows
            return [(mine.logits, out.prediction_logits.numpy()), (mine.nsp_logits[:, ::-1], pair.numpy())]
        if name == "electra":
            disc = transformers.ElectraForPreTraining.from_pretrained(hf / "discriminator").eval()
            gen = transformers.ElectraForMaskedLM.from_pretrained(hf / "generator").eval()
            z = model.discriminator_head(model.discriminator(ids))
            g = model.generator_head(model.generator(ids))
            return [(z, disc(input_ids=t).logits.numpy()), (g, gen(input_ids=t).logits.numpy())]
        theirs = transformers.AutoModelForSeq2SeqLM.from_pretrained(hf).eval()
        target_in = ids[:, ::-1].copy()[:, :6]
        out = theirs(input_ids=t, decoder_input_ids=torch.tensor(target_in)).logits.numpy()
        return [(model(ids, target_in)[1], out)]


@pytest.mark.parametrize("name", list(CASES))
def test_transformers_loads_the_export_with_equal_ids_and_logits(name, exports):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("torch")
    run, hf, model, tok, _ = exports[name]
    text = TEXTS[CASES[name][0]]
    roles = {r: tok.token_to_id(s) for r, s in special_roles(tok).items() if isinstance(s, str)}
    for folder in folders(name, hf):
        theirs = transformers.AutoTokenizer.from_pretrained(folder)
        assert theirs(text, add_special_tokens=False)["input_ids"] == tok.encode(text)
        assert {r: getattr(theirs, f"{r}_id") for r in roles} == roles          # [PAD] is the pad token, ...
    ids = np.array([tok.encode(text)[:24]])
    for ours, ref in ours_and_theirs(name, hf, model, ids):
        assert ours.shape == ref.shape
        np.testing.assert_allclose(ours, ref, rtol=1e-4, atol=1e-5)


def test_bert_tokenizer_frames_a_pair_as_minipt_does(exports):
    transformers = pytest.importorskip("transformers")
    _, hf, _, tok, _ = exports["bert"]
    theirs = transformers.AutoTokenizer.from_pretrained(hf)
    a, b = "the cat sat", "the dog"
    cls, sep = tok.token_to_id(CLS), tok.token_to_id(SEP)
    assert theirs(a, b)["input_ids"] == [cls, *tok.encode(a), sep, *tok.encode(b), sep]
    assert theirs.mask_token_id == tok.token_to_id(MASK) and theirs.pad_token_id == tok.token_to_id(PAD)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["bert", "t5", "bart", "xlnet", "transformer"])
def test_trained_runs_export(name, tmp_path):
    """``minipt train NAME --steps 2`` (the preset's data and tokenizer), then ``minipt export``;
    transformers loads it with minipt's ids and logits."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("torch")
    from minipt.recipes.char_lm import load_trained
    run, hf = tmp_path / "run", tmp_path / "hf"
    assert main(["train", name, "--steps", "2", "--out", str(run)]) == 0
    assert main(["export", "--checkpoint", str(run), "--to", str(hf)]) == 0
    model, tok = load_trained(run)
    text = {"xlnet": "the cat"}.get(name, "translate toy: the cat sleeps .")
    assert transformers.AutoTokenizer.from_pretrained(hf)(text, add_special_tokens=False)["input_ids"] == \
        tok.encode(text)
    ids = np.array([tok.encode(text)])
    for ours, ref in ours_and_theirs(name, hf, model, ids):
        np.testing.assert_allclose(ours, ref, rtol=1e-4, atol=1e-5)


def test_a_tokenizer_without_a_transformers_form_is_saved_as_minipts_and_said(tmp_path, capsys):
    from minipt.tokenizers.bpe import BPETokenizer
    run = tiny_run(tmp_path, "gpt", BPETokenizer().fit(CORPUS, 20))   # Sennrich's character BPE: no HF class
    assert main(["export", "--checkpoint", str(run), "--to", str(tmp_path / "hf")]) == 0
    assert "BPETokenizer has no transformers form" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "hf").iterdir()) == ["config.json", "minipt_tokenizer.json",
                                                                  "model.safetensors"]
