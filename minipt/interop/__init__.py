"""Interoperability with Hugging Face ``transformers``, with no torch at run time.

``save_pretrained(model, folder)`` writes a minipt GPT as a folder that
``GPT2LMHeadModel`` / ``LlamaForCausalLM`` / ``OpenAIGPTLMHeadModel`` ``.from_pretrained`` loads;
``from_pretrained(folder)`` reads such a folder (as transformers writes it) into a
minipt GPT. Tensors travel as safetensors through its NumPy API; nothing is unpickled.
The name tables are ``gpt2_layout.py``, ``llama_layout.py`` and ``openai_gpt_layout.py``;
``xlnet_layout.py`` and the BERT family's ``bert_layout.py``, ``roberta_layout.py``,
``albert_layout.py``, ``electra_layout.py``, ``bart_layout.py``, ``t5_layout.py`` and
``marian_layout.py`` (the Vaswani Transformer) do the same for those models; the
tokenizer goes with the model in the form ``AutoTokenizer`` reads (``tokenizers/hf_files.py``).
``sentence_embeddings.py`` reads a pretrained BERT (sentence-transformers' all-MiniLM-L6-v2)
for sentence embeddings (``minipt embed``).
"""
from .pretrained import (
    config_from_folder,
    from_pretrained,
    layout_for,
    layout_of,
    save_pretrained,
    their_named,
)

__all__ = ["save_pretrained", "from_pretrained", "config_from_folder", "layout_for", "layout_of", "their_named"]
