"""Writes a tiny random-weight Llama chat model into a directory, offline, for the test of the
LLM client against a real OpenAI-compatible server (`transformers serve`).

    python write_tiny_chat_model.py OUT_DIR

The tokenizer is built here with the `tokenizers` library: a word-level vocabulary of plain
lowercase words and digits, so nothing is downloaded, and the model cannot emit a backtick: its
answers can never hold a code block, whatever the random weights sample. The chat template is a
minimal role-tagged one. Weights are seeded, so the same directory comes out every time; the
generation config samples words only, so every answer is max_tokens words of gibberish.
"""

import json
import pathlib
import sys

import torch
from tokenizers import Tokenizer, models, pre_tokenizers, decoders
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

SPECIAL = ["<unk>", "<s>", "</s>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]
WORDS = (
    "the a of to and in is it for on with as by at from that this be are was kernel "
    "thread block warp grid row column tensor float half shared memory register load store "
    "sum max min mean exp log norm softmax layer rms group batch pool relu gelu silu tanh "
    "sigmoid add mul reduce vector tile loop index stride size shape dim input output weight "
    "bias scale eps value result fast slow good bad yes no maybe because then else when "
    "while here there one two three four five six seven eight nine ten"
).split()
WORDS += [str(i) for i in range(100)]

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>' }}{{ message['content'] }}{{ '<|end|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}"
)


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: write_tiny_chat_model.py OUT_DIR", file=sys.stderr)
        return 2
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)

    vocab = {token: i for i, token in enumerate(SPECIAL + sorted(set(WORDS)))}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    tok.add_special_tokens(SPECIAL)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="<|end|>",
        pad_token="</s>",
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)

    torch.manual_seed(1234)
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=16384,
        bos_token_id=vocab["<s>"],
        eos_token_id=vocab["<|end|>"],
        pad_token_id=vocab["</s>"],
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(config).to(torch.float32)
    # Greedy decoding of random weights repeats one token, often a special one that the server
    # drops from the text; sampling over the words alone (every special token suppressed, EOS
    # included) makes every answer exactly max_tokens plain words.
    model.generation_config = GenerationConfig(
        do_sample=True,
        temperature=1.0,
        top_k=0,
        top_p=1.0,
        suppress_tokens=[vocab[t] for t in SPECIAL],
        bos_token_id=vocab["<s>"],
        eos_token_id=vocab["<|end|>"],
        pad_token_id=vocab["</s>"],
    )
    model.save_pretrained(out)
    print(json.dumps({"dir": str(out), "vocab": len(vocab)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
