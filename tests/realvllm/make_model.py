"""Build a tiny, deterministic random Llama + byte-level BPE tokenizer for the real-vLLM tests.

No model hub is reachable, so the test model is made locally. Same inputs give byte-identical
files (seeded weights, tokenizer trained on a sorted list of stdlib sources), which makes the
server's greedy outputs, and so its spec-decode metrics, reproducible across machines.

usage: python make_model.py OUT_DIR [SEED]

SEED (default 0, the target model) seeds only the weights: another seed gives the same
architecture and tokenizer with other weights, a draft model that disagrees with the target.
"""

import glob
import os
import sys
import sysconfig

SPECIAL_TOKENS = ["<|bos|>", "<|eos|>", "<|pad|>", "<|user|>", "<|assistant|>", "<|system|>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def train_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    sources = sorted(glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "*.py")))[:200]
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=2048,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train(sources, trainer)
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def build(out_dir, seed=0):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(seed)
    hf_tok = PreTrainedTokenizerFast(
        tokenizer_object=train_tokenizer(),
        bos_token="<|bos|>",
        eos_token="<|eos|>",
        pad_token="<|pad|>",
    )
    hf_tok.chat_template = CHAT_TEMPLATE
    hf_tok.save_pretrained(out_dir)
    # vLLM's CPU attention takes head sizes {32, 64, 80, ...}: hidden 128 / 2 heads = 64.
    config = LlamaConfig(
        vocab_size=len(hf_tok),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        bos_token_id=hf_tok.bos_token_id,
        eos_token_id=hf_tok.eos_token_id,
        pad_token_id=hf_tok.pad_token_id,
        tie_word_embeddings=False,
    )
    LlamaForCausalLM(config).to(torch.float32).save_pretrained(out_dir, safe_serialization=True)
    with open(os.path.join(out_dir, "chat_template.jinja"), "w") as fh:
        fh.write(CHAT_TEMPLATE)


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: make_model.py OUT_DIR [SEED]")
    build(sys.argv[1], int(sys.argv[2]) if len(sys.argv) == 3 else 0)
    print("model ready:", sys.argv[1])
