"""minipt generate: a text-to-text prompt answered by an encoder-decoder run (beam search,
--beam 1 greedy); an unknown prefix is answered with a note; bad input is a one-line
error with exit status 2."""
import json

import numpy as np
import pytest

from minipt.cli import main
from minipt.core.checkpoint import save_checkpoint
from minipt.data import text_to_text as t2t
from minipt.inference.seq2seq_decoding import beam_search, greedy
from minipt.models import registry
from minipt.models.decoder.gpt import perturbed


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A run folder as `minipt train transformer` leaves it, with a small untrained model."""
    out = tmp_path_factory.mktemp("run")
    tok = t2t.build_tokenizer(t2t.text_to_text((30, 5, 5)))
    model = perturbed(registry.get("transformer").build(
        rng=np.random.default_rng(0), vocab_size=tok.vocab_size, n_encoder_layers=1, n_decoder_layers=1, n_head=2,
        d_model=16, max_source_len=20, max_target_len=12), scale=1.0)
    tok.save(out / "tokenizer.json")
    save_checkpoint(out / "checkpoint.npz", model, config=model.spec())
    (out / "run.json").write_text(json.dumps({"preset": "toy", "steps": 1, "seed": 0, "start_token": "<s>",
                                              "end_token": "</s>"}))
    return out, model, tok


PROMPT = "translate toy: the quick fox likes a fish ."            # beam 3 differs from greedy here


def test_generate_prints_the_decoded_answer(run, capsys):
    out, model, tok = run
    src = np.array(tok.encode(PROMPT))
    for beam in (1, 3):
        assert main(["generate", "--checkpoint", str(out), "--beam", str(beam), PROMPT]) == 0
        got = capsys.readouterr()
        want = beam_search(model, src, start_id=1, eos_id=2, beam_size=beam)
        assert got.out == t2t.answer_text(tok, want) + "\n" and got.err == ""
        if beam == 1:
            assert want == greedy(model, src[None], start_id=1, eos_id=2)[0]
            first = got.out
    assert got.out != first                                                 # --beam reached the search
    assert main(["generate", "--checkpoint", str(out), PROMPT]) == 0          # default: greedy
    assert capsys.readouterr().out == t2t.answer_text(tok, beam_search(model, src, start_id=1, eos_id=2, beam_size=1)) + "\n"


def test_an_unknown_prefix_is_answered_with_a_note(run, capsys):
    out, model, tok = run
    assert main(["generate", "--checkpoint", str(out), "paraphrase: the cat sleeps ."]) == 0
    got = capsys.readouterr()
    assert "note: unknown task prefix; trained prefixes are translate toy:, summarize:" in got.err
    src = np.array(tok.encode("paraphrase: the cat sleeps ."))
    assert got.out == t2t.answer_text(tok, beam_search(model, src, start_id=1, eos_id=2, beam_size=1)) + "\n"


@pytest.mark.parametrize("argv, message", [
    (["--checkpoint", "{tmp}/nope", PROMPT], "no checkpoint at"),
    (["--checkpoint", "{run}", "   "], "the prompt is empty"),
    (["--checkpoint", "{run}", "translate toy: " + "the cat " * 10], "source length 23 exceeds max_source_len 20"),
    (["--checkpoint", "{run}", "--beam", "0", PROMPT], "--beam: must be >= 1"),
])
def test_bad_input_is_one_line(run, tmp_path, capsys, argv, message):
    argv = [a.format(tmp=tmp_path, run=run[0]) for a in argv]
    with pytest.raises(SystemExit) if "--beam" in argv else _nothing():
        assert main(["generate", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_run_that_is_not_text_to_text_is_refused(tmp_path, capsys):
    from minipt.tokenizers.char import CharTokenizer
    model = registry.get("gpt").tiny()[0]
    save_checkpoint(tmp_path / "checkpoint.npz", model, config=model.spec())
    CharTokenizer().fit("abcdefg").save(tmp_path / "tokenizer.json")
    assert main(["generate", "--checkpoint", str(tmp_path), "translate toy: x"]) == 2
    err = capsys.readouterr().err
    assert "holds a GPT-2 model" in err and "use `minipt sample`" in err and err.count("\n") == 1


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
