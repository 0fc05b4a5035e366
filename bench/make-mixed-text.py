#!/usr/bin/env python3
"""Writes about 1 MB of mixed text for the tokenizer benchmark (bench/tokenize-bench.sh):
English prose, C and Python code with indentation, CJK (Chinese, Japanese, Korean), emoji,
numbers and whitespace runs, in paragraphs drawn with a fixed seed (the same file every time).
usage: python3 bench/make-mixed-text.py OUT.txt [BYTES]"""
import random, sys

WORDS = ("the of and to in is was that for it with as his on be at by had are but from or have an they which one you "
         "were her all she there would their we him been has when who will more no if out so said what up its about into "
         "than them can only other new some could time these two may then do first any my now such like our over man me "
         "even most made after also did many before must through back years where much your way well down should because "
         "each just those people Mr how too little state good very make world still own see men work long get here between "
         "both life being under never day same another know while last might us great old year off come since against go "
         "came right used take three").split()
CODE = [
    "int main(int argc, char **argv) {\n    for (int i = 0; i < argc; i++) {\n        printf(\"%s\\n\", argv[i]);\n    }\n    return 0;\n}\n",
    "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n\nprint([fib(i) for i in range(10)])\n",
    "static inline float dot(const float *x, const float *y, size_t n) {\n\tfloat s = 0.0f;\n\twhile (n--) s += *x++ * *y++;\n\treturn s;\n}\n",
    "<div class=\"row\">\n  <span id='x-1'>&lt;tag&gt;</span>\n</div>\n",
    "SELECT name, COUNT(*) AS n FROM users WHERE age >= 18 GROUP BY name ORDER BY n DESC;\n",
]
CJK = ("我们的世界是一个美丽的地方，每天都有新的故事发生。", "今日はとても良い天気ですね。東京タワーに行きましょう！",
       "한국어 텍스트도 조금 섞어 봅시다. 오늘은 월요일입니다.", "机器学习模型需要大量的数据和计算资源。")
EMOJI = "😀😃😄😁😆😅🤣😂🙂🙃😉😊😇🥰😍🤩😘🦙🚀🌍🔥✨👍🏽👩‍💻🇯🇵❤️"


def paragraph(rng):
    kind = rng.random()
    if kind < 0.55:
        s = " ".join(rng.choice(WORDS) for _ in range(rng.randint(30, 90)))
        s = s[0].upper() + s[1:] + ". "
        if rng.random() < 0.3:
            s += "In %d, about %d,%03d people paid $%d.%02d each (%d%%). " % (
                rng.randint(1800, 2030), rng.randint(1, 999), rng.randint(0, 999), rng.randint(1, 500), rng.randint(0, 99), rng.randint(0, 100))
        if rng.random() < 0.3:
            s += "She said: \"I'm sure they'll come, don't worry\" -- and it's true. "
        return s + "\n\n"
    if kind < 0.75:
        return rng.choice(CODE) + "\n"
    if kind < 0.9:
        return "".join(rng.choice(CJK) for _ in range(rng.randint(2, 6))) + "\n\n"
    return " ".join("".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 4))) + " " + rng.choice(WORDS)
                    for _ in range(rng.randint(5, 15))) + "   \n\t\n"


def main():
    out, size = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1 << 20
    rng = random.Random(1234)
    parts, n = [], 0
    while n < size:
        p = paragraph(rng).encode()
        parts.append(p)
        n += len(p)
    data = b"".join(parts)[:size]
    while data and (data[-1] & 0xC0) == 0x80:  # do not end inside a character
        data = data[:-1]
    if data and data[-1] >= 0xC0:
        data = data[:-1]
    open(out, "wb").write(data)


main()
