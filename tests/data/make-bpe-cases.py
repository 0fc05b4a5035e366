#!/usr/bin/env python3
"""Makes tests/data/bpe-cases.txt: reference tokenizations of the byte-level BPE test texts.

Run once (not by the tests) from the repository root, with the reference engine beside it:
  python3 tests/data/make-bpe-cases.py ../shared/models/vocab ../shared/peers/llama.cpp-cpu/bin/llama-tokenize
It tokenizes every text below with `llama-tokenize -f FILE --ids --log-disable --no-escape`,
with and without --no-parse-special, on the Llama-3 and Qwen2 vocabularies, and on copies of the
Llama-3 vocabulary whose tokenizer.ggml.pre is changed to each other pre-tokenizer Loom knows
(written to a temporary folder; the tests build the same vocabularies in memory).
Output lines: `text HEX`, then `VOCAB PRE MODE IDS...` (MODE special|plain, VOCAB llama-bpe|qwen2).
"""
import os, struct, subprocess, sys, tempfile

TEXTS = [
    "Hello world",
    " Hello world",
    "Hello World! How are YOU doing today?",
    "The quick brown fox jumps over the lazy dog.",
    "I'M SURE THEY'LL SAY IT'S FINE, WE'VE DONE IT'D",
    "don't won't I'm we'll you're they've she'd",
    "int main(void) {\n    printf(\"%d\\n\", x + 42);\n    return 0;\n}\n",
    "def f(x):\n\tif x >= 10:\n\t\treturn [i**2 for i in range(x)]\n",
    "<html><body class=\"a-b_c\">&nbsp;</body></html>",
    "a  b   c    d     e",
    "   leading and trailing   ",
    "\n\n\nthree newlines then text\r\n\r\nwindows lines\r\n",
    "\t\t tabs \t and \x0b vertical \x0c feeds",
    "1 12 123 1234 12345 123456 1234567 3.14159 1,000,000 0x1F",
    "٣٤٥ ①②③ ¹²³ Ⅻ",
    "日本語のテキスト、中文文本。한국어 텍스트",
    "naïve café, jalapeño, Ångström, Œuvre, straße",
    "Здравствуй, мир! Γειά σου Κόσμε",
    "नमस्ते दुनिया",
    "مرحبا بالعالم",
    "สวัสดีชาวโลก",
    "e\u0301 combining a\u0308 marks",
    "emoji 🦙🚀 mix 👩‍👩‍👧 👍🏽 🇫🇷",
    "ideographic\u3000space, no\u00a0break, em\u2003space, line\u2028sep, nel\u0085",
    "\x1c\x1d\x1e\x1f unit separators",
    "null \x00 byte",
    "tokens <|begin_of_text|> and <|eot_id|> and <|im_start|>user\nhi<|im_end|>\n<|endoftext|>",
    "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>",
    "<<|eot_id|>> nested <|eot_id|<|eot_id|>|>",
    "$100 + 5% = <tag> ~tilde^ `code` |pipe| {braces} [brackets] @at #hash",
    "...!!!???---___***",
    "a's b'S c'll D'LL 'tis",
    "",
    " ",
    "\n",
]
# byte strings that are not valid UTF-8
RAW = [
    b"a\xffb",
    b"a\xc0\x80b overlong",
    b"a\xed\xa0\x80b surrogate",
    b"cut \xe6\x97",
    b"\x80\x80 lone continuation bytes",
    b"mixed \xe6\x97\xa5\xff\xe6\x9c\xac",
]

PRES = ["llama-bpe", "default", "gpt-2", "smollm", "deepseek-llm", "qwen2"]


def rd(f, fmt):
    return struct.unpack("<" + fmt, f.read(struct.calcsize("<" + fmt)))


SZ = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


def rval(f, t):
    if t == 8:
        (n,) = rd(f, "Q")
        return f.read(n)
    if t == 9:
        at, n = rd(f, "IQ")
        return (at, [rval(f, at) for _ in range(n)])
    return rd(f, SZ[t])[0]


def wval(o, t, v):
    if t == 8:
        o.write(struct.pack("<Q", len(v)) + v)
    elif t == 9:
        at, items = v
        o.write(struct.pack("<IQ", at, len(items)))
        for x in items:
            wval(o, at, x)
    else:
        o.write(struct.pack("<" + SZ[t], v))


def with_pre(src, dst, pre):
    """Copies a tensor-less GGUF, setting tokenizer.ggml.pre."""
    with open(src, "rb") as f:
        magic = f.read(4)
        ver, nt, nkv = rd(f, "IQQ")
        assert nt == 0
        kvs = []
        for _ in range(nkv):
            (n,) = rd(f, "Q")
            k = f.read(n)
            (t,) = rd(f, "I")
            kvs.append((k, t, rval(f, t)))
    kvs = [(k, t, pre.encode() if k == b"tokenizer.ggml.pre" else v) for k, t, v in kvs]
    with open(dst, "wb") as o:
        o.write(magic + struct.pack("<IQQ", ver, 0, len(kvs)))
        for k, t, v in kvs:
            o.write(struct.pack("<Q", len(k)) + k + struct.pack("<I", t))
            wval(o, t, v)
        pad = (-o.tell()) % 32
        o.write(b"\0" * pad)


def ids(tok, model, path, special):
    cmd = [tok, "-m", model, "-f", path, "--ids", "--log-disable", "--no-escape"]
    if not special:
        cmd.append("--no-parse-special")
    out = subprocess.run(cmd, capture_output=True, check=True).stdout.decode().strip().splitlines()[-1]
    return out.strip("[]").replace(",", " ").split()


def main():
    vocab_dir, tok = sys.argv[1], sys.argv[2]
    llama = os.path.join(vocab_dir, "ggml-vocab-llama-bpe.gguf")
    qwen = os.path.join(vocab_dir, "ggml-vocab-qwen2.gguf")
    tmp = tempfile.mkdtemp()
    models = []
    for pre in PRES:
        if pre == "qwen2":
            models.append(("qwen2", "qwen2", qwen))
        elif pre == "llama-bpe":
            models.append(("llama-bpe", pre, llama))
        else:
            p = os.path.join(tmp, pre + ".gguf")
            with_pre(llama, p, pre)
            models.append(("llama-bpe", pre, p))
    out = ["# reference tokenizations for tests/test-bpe.c, made by tests/data/make-bpe-cases.py",
           "# (llama.cpp c392e509: llama-tokenize -f FILE --ids --log-disable --no-escape [--no-parse-special])"]
    inp = os.path.join(tmp, "in.txt")
    for text in [t.encode() for t in TEXTS] + RAW:
        out.append("text " + text.hex())
        with open(inp, "wb") as f:
            f.write(text)
        for vocab, pre, path in models:
            for special in (True, False):
                if pre not in ("llama-bpe", "qwen2") and not special:
                    continue
                out.append(" ".join([vocab, pre, "special" if special else "plain"] + ids(tok, path, inp, special)))
    sys.stdout.write("\n".join(out) + "\n")


main()
