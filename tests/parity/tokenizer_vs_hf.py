#!/usr/bin/env python3
"""Tokenizer parity: models/tokenizer/tokenizer.c (through tokenize_cli) against transformers' CLIPTokenizer.

Both read the same vocab.json + merges.txt. A few hundred varied strings, fresh each run
(seed printed; --seed replays), are tokenized raw (no start/end) and as the 77-id SD 1.x
encoding (start, tokens, end, end-padding, truncation); placeholders are added to both as
added tokens.

Strings fall in two groups:
  core  plain prompts: ASCII, accented Latin, Greek/Cyrillic, digits, punctuation,
        contractions, emphasis syntax, whitespace runs, long prompts, placeholders.
        Every one must match exactly (exit 1 otherwise).
  edge  where transformers itself differs by environment: without ftfy it runs BERT's
        BasicTokenizer (spaces around CJK characters, control and format characters such as
        ZWJ dropped, no HTML unescape); with ftfy, fix_text uncurls quotes, narrows full-width
        forms, expands ligatures and applies NFC. models/tokenizer/tokenizer.c follows OpenAI's simple_tokenizer
        without ftfy. Mismatches here are reported, not failed.

Usage (from the repository root, after building tokenize_cli):
  python3 tests/parity/tokenizer_vs_hf.py [--tokenizer DIR] [--cli build/tests/parity/tokenize_cli]
         [--n 300] [--seed N] [--reference hf|simple|both] [--notes tests/parity/NOTES.md]
--reference simple uses clip_simple_tokenizer.py (OpenAI's algorithm; needs only `regex`), so the
script also runs where transformers is absent. Exit 77 when the tokenizer files or the chosen
reference are unavailable.
"""
import argparse
import datetime
import json
import os
import platform
import random
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SKIP = 77
PLACEHOLDERS = ["<cat-toy>", "sks-style", "<my_emb>"]

WORDS = """a an the photo of cat dog portrait painting highly detailed masterpiece best quality trending on
artstation by greg rutkowski and alphonse mucha digital art concept illustration octane render unreal engine
cinematic lighting sharp focus intricate elegant volumetric fog sunset beach mountain city night neon cyberpunk
castle forest river astronaut riding horse oil canvas watercolor sketch anime girl boy man woman old young smiling
red blue green golden silver dark light soft hard ultra realistic photorealistic hdr bokeh depth field wide angle
lens 35mm 85mm f/1.8 dslr kodak portra film grain vintage retro futuristic steampunk fantasy sci-fi dragon knight
wizard robot spaceship underwater coral reef snow winter autumn spring summer rain storm lightning clouds sky stars
galaxy nebula moon sun flower rose tulip garden house room interior kitchen street market crowd""".split()
PUNCT = [",", ".", "!", "?", ";", ":", "-", "_", "/", "\\", "(", ")", "[", "]", "{", "}", "|", "*", "+", "=", "~",
         "@", "#", "$", "%", "^", "&", "<", ">", "'", '"', "`", "...", "!!", "--", "—", "…", "·", "°", "€", "£", "©"]
CONTRACTIONS = ["it's", "don't", "they're", "we've", "I'm", "you'll", "he'd", "IT'S", "Don'T", "cat's", "o'clock"]
EMPHASIS = ["(masterpiece:1.2)", "((best quality))", "[ugly]", "[cat|dog]", "(red hair:0.8)", "{blue eyes}",
            "BREAK", "AND"]
NUMBERS = ["4k", "8K", "1920x1080", "2023", "3.14", "v1.5", "no.1", "100%", "x2", "1/2", "²", "½", "١٢٣"]
UNICODE_CORE = ["café", "naïve", "Straße", "Ærøskøbing", "ĐÀ NẴNG", "Ελληνικά", "Москва", "ЖУРНАЛ", "żółć",
                "señor", "ÇA", "🙂", "🐱 cat", "✨sparkles✨", "→", "♥love♥"]
EDGE = ["日本語のテキスト", "猫の写真", "한국어 문장", "“curly quotes”", "‘single’", "ﬁne ligature", "ＦＵＬＬＷＩＤＴＨ",
        "e\u0301clair (decomposed)", "tab\x0bvertical", "form\x0cfeed", "ctrl\x01char", "zero\u200bwidth",
        "&amp; &lt;tag&gt; &#39;quoted&#39; &quot;q&quot;", "fish &amp chips", "nbsp\u00a0between", "İstanbul",
        "\ufffd replacement", "mixed 中文 and english", "line\u2028separator", "astronaut \U0001f469\u200d\U0001f680 (zwj)"]


def random_prompt(rng):
    parts = []
    for _ in range(rng.randint(1, 25)):
        r = rng.random()
        if r < 0.55:
            w = rng.choice(WORDS)
            parts.append(w.capitalize() if rng.random() < 0.15 else w.upper() if rng.random() < 0.05 else w)
        elif r < 0.68:
            parts.append(rng.choice(PUNCT))
        elif r < 0.75:
            parts.append(rng.choice(CONTRACTIONS))
        elif r < 0.82:
            parts.append(rng.choice(EMPHASIS))
        elif r < 0.89:
            parts.append(rng.choice(NUMBERS))
        elif r < 0.96:
            parts.append(rng.choice(UNICODE_CORE))
        else:
            parts.append(rng.choice(PLACEHOLDERS))
    out = ""
    prev_placeholder = False
    for p in parts:
        sep = rng.choice([" ", " ", " ", ", ", "", "  ", "\t", "\n", " \r\n "])
        if p in PLACEHOLDERS or prev_placeholder:
            sep = rng.choice([" ", ", ", "\n"])  # placeholders are whole words (transformers would split them anywhere)
        out += (sep if out else rng.choice(["", "", " "])) + p
        prev_placeholder = p in PLACEHOLDERS
    return out + rng.choice(["", "", " ", "\n", "."])


def corpus(rng, n):
    fixed = ["a photo of a cat", "An astronaut riding a horse, 4k, trending on ArtStation!!", "", "   ", "a",
             "A PHOTO OF A CAT", "a photo of <cat-toy>", "<cat-toy>", "a <cat-toy>, <cat-toy>!", "sks-style painting",
             "a <my_emb> and <my_emb>s", "<|startoftext|>inside<|endoftext|>", "<|endoftext|> a cat",
             "don't won't can't shouldn't y'all", "supercalifragilisticexpialidocious" * 3,
             " ".join(["word"] * 80), " ".join(WORDS), ", ".join(["masterpiece"] * 40) + " <cat-toy>",
             "multiple   spaces\tand\ttabs\n\nnewlines", "trailing space ", " leading space"]
    core = [("core", s) for s in fixed]
    while len(core) < n - len(EDGE):
        core.append(("core", random_prompt(rng)))
    return core + [("edge", s) for s in EDGE]


def run_cli(cli, tok_dir, texts):
    cmd = [cli, tok_dir]
    for p in PLACEHOLDERS:
        cmd += ["--add", p]
    inp = "".join(json.dumps(t) + "\n" for t in texts)
    res = subprocess.run(cmd, input=inp.encode(), capture_output=True, check=True)
    lines = res.stdout.decode().splitlines()
    added = json.loads(lines[0])["added"]
    return added, [json.loads(l) for l in lines[1:]]


class HFReference:
    def __init__(self, tok_dir):
        from transformers import CLIPTokenizer
        import transformers

        self.name = "transformers %s CLIPTokenizer" % transformers.__version__
        self.tok = CLIPTokenizer(os.path.join(tok_dir, "vocab.json"), os.path.join(tok_dir, "merges.txt"))
        self.tok.add_tokens(PLACEHOLDERS)
        try:  # transformers 5 tokenizers have no fix_text attribute (and raise rather than return None)
            fix_text = self.tok.fix_text
        except AttributeError:
            fix_text = None
        self.name += " (ftfy)" if fix_text is not None else " (no ftfy)"
        self.added = {p: self.tok.convert_tokens_to_ids(p) for p in PLACEHOLDERS}

    def raw(self, text):
        return self.tok(text, add_special_tokens=False)["input_ids"]

    def ids77(self, text):
        return self.tok(text, padding="max_length", max_length=77, truncation=True)["input_ids"]


class SimpleReference:
    def __init__(self, tok_dir):
        sys.path.insert(0, HERE)
        from clip_simple_tokenizer import SimpleTokenizer

        self.name = "OpenAI simple_tokenizer (no ftfy)"
        self.tok = SimpleTokenizer(os.path.join(tok_dir, "vocab.json"), os.path.join(tok_dir, "merges.txt"))
        n = len(self.tok.encoder)
        self.added = {p: n + i for i, p in enumerate(PLACEHOLDERS)}

    def _split(self, text):
        # Placeholders are matched as given (lowercase, delimited in the corpus) and never split.
        pieces = [(text, None)]
        for p in PLACEHOLDERS:
            out = []
            for s, pid in pieces:
                if pid is not None:
                    out.append((s, pid))
                    continue
                chunks = s.split(p)
                for i, c in enumerate(chunks):
                    out.append((c, None))
                    if i < len(chunks) - 1:
                        out.append((p, self.added[p]))
            pieces = out
        return pieces

    def raw(self, text):
        ids = []
        for s, pid in self._split(text):
            ids += [pid] if pid is not None else self.tok.encode(s)
        return ids

    def ids77(self, text):
        toks = self.raw(text)[:75]
        ids = [self.tok.sot] + toks + [self.tok.eot]
        return ids + [self.tok.eot] * (77 - len(ids))


def compare(ref, texts, cats, ours, ours_added, show):
    bad = {"core": [], "edge": []}
    if ref.added != ours_added:
        print("added token ids differ: reference %s, ours %s" % (ref.added, ours_added))
        bad["core"].append(("<added ids>", ref.added, ours_added))
    for cat, text, o in zip(cats, texts, ours):
        raw, ids = ref.raw(text), ref.ids77(text)
        cut = max(0, len(raw) - 75)
        if o.get("tokens") != raw or o.get("ids") != ids or o.get("cut") != cut:
            bad[cat].append((text, raw, o.get("tokens")))
    for cat in ("core", "edge"):
        for text, want, got in bad[cat][:show]:
            print("  %s mismatch: %r\n    reference %s\n    ours      %s" % (cat, text, want, got))
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    candidates = [os.path.join(base, "shared", "data", "clip-vit-l-14-tokenizer")
                  for base in (ROOT, os.path.dirname(ROOT), os.path.dirname(os.path.dirname(ROOT)))]
    default_dir = os.environ.get("SDT_CLIP_TOKENIZER_DIR",
                                 next((c for c in candidates if os.path.isdir(c)), candidates[0]))
    ap.add_argument("--tokenizer", default=default_dir, help="folder with vocab.json and merges.txt")
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "tests", "parity", "tokenize_cli"))
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--reference", choices=["hf", "simple", "both"], default="hf")
    ap.add_argument("--notes", default=os.path.join(HERE, "NOTES.md"), help="file to append a result line to ('' = none)")
    ap.add_argument("--show", type=int, default=10, help="mismatches to print per group")
    args = ap.parse_args()

    if not os.path.exists(os.path.join(args.tokenizer, "vocab.json")):
        print("skip: no vocab.json in %s (set SDT_CLIP_TOKENIZER_DIR)" % args.tokenizer)
        return SKIP
    if not os.access(args.cli, os.X_OK):
        print("tokenize_cli not found at %s: build it (cmake --build build --target tokenize_cli)" % args.cli)
        return 1
    refs = []
    try:
        if args.reference in ("hf", "both"):
            refs.append(HFReference(args.tokenizer))
        if args.reference in ("simple", "both"):
            refs.append(SimpleReference(args.tokenizer))
    except ImportError as e:
        print("skip: reference unavailable (%s)" % e)
        return SKIP

    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    print("seed %d (--seed %d replays)" % (seed, seed))
    items = corpus(random.Random(seed), args.n)
    cats, texts = [c for c, _ in items], [t for _, t in items]
    ours_added, ours = run_cli(args.cli, args.tokenizer, texts)

    failed = False
    lines = []
    for ref in refs:
        print("reference: %s" % ref.name)
        bad = compare(ref, texts, cats, ours, ours_added, args.show)
        n_core, n_edge = cats.count("core"), cats.count("edge")
        summary = "%s: core %d/%d match, edge %d/%d match" % (
            ref.name, n_core - len(bad["core"]), n_core, n_edge - len(bad["edge"]), n_edge)
        print(summary)
        failed |= bool(bad["core"])
        lines.append("- tokenizer_vs_hf %s UTC, %s, seed %d, %d strings: %s -> %s" % (
            datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M"), platform.node(), seed, len(texts), summary,
            "FAIL" if bad["core"] else "pass"))
    if args.notes:
        new = not os.path.exists(args.notes)
        with open(args.notes, "a", encoding="utf-8") as f:
            if new:
                f.write("# Parity runs\n\nOne line per run of a tests/parity script.\n\n")
            f.write("\n".join(lines) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
