"""Lay out an offline tokenizer for AIPerf 0.13 as a Hugging Face hub-cache entry.

AIPerf 0.13 routes even a local tokenizer path through the hub client, which fails offline.
A hub-cache entry works: $HF_HOME/hub/models--ORG--NAME/snapshots/<40 hex>/ plus refs/main
holding that hex; AIPerf is then run with `--tokenizer ORG/NAME` and HF_HOME set.
The tokenizer is a small byte-level BPE trained on the Shakespeare text AIPerf's wheel ships
(its synthetic prompt corpus), so no download is needed.

usage: python make_tokenizer.py HF_HOME [ORG/NAME]   (run with the aiperf venv's python)
"""

import hashlib
import os
import shutil
import sys
import tempfile

DEFAULT_NAME = "specmon/shakespeare-bpe"


def corpus_path():
    import aiperf

    path = os.path.join(
        os.path.dirname(aiperf.__file__), "dataset", "generator", "assets", "shakespeare.txt"
    )
    if not os.path.isfile(path):
        raise SystemExit(f"aiperf ships no corpus at {path}")
    return path


def save_tokenizer(out_dir):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train(
        [corpus_path()],
        trainers.BpeTrainer(
            vocab_size=4096,
            special_tokens=["<|bos|>", "<|eos|>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<|bos|>", eos_token="<|eos|>"
    ).save_pretrained(out_dir)


def install(hf_home, name):
    org, model = name.split("/")
    repo_dir = os.path.join(hf_home, "hub", f"models--{org}--{model}")
    with tempfile.TemporaryDirectory() as tmp:
        save_tokenizer(tmp)
        with open(os.path.join(tmp, "tokenizer.json"), "rb") as fh:
            revision = hashlib.sha1(fh.read()).hexdigest()  # any 40-hex id names a snapshot
        snapshot = os.path.join(repo_dir, "snapshots", revision)
        shutil.rmtree(repo_dir, ignore_errors=True)
        shutil.copytree(tmp, snapshot)
    os.makedirs(os.path.join(repo_dir, "refs"), exist_ok=True)
    with open(os.path.join(repo_dir, "refs", "main"), "w") as fh:
        fh.write(revision)
    return snapshot


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: make_tokenizer.py HF_HOME [ORG/NAME]")
    print(
        "tokenizer ready:",
        install(sys.argv[1], sys.argv[2] if len(sys.argv) == 3 else DEFAULT_NAME),
    )
