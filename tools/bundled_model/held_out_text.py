"""Writes the passages train.py held out of the bundled model's training (its plain-text held-out
documents, one per paragraph block, separated by blank lines), for `tandem perplexity`:

    /work/venv-train/bin/python tools/bundled_model/held_out_text.py --out /tmp/held_out.txt
    build/release/tandem perplexity --text-file /tmp/held_out.txt --context 256

It rebuilds the documents exactly as train.py does with its defaults (same corpus, seed and
split), so the text is what the model never trained on. Needs numpy (train.py's requirements).
"""
import argparse
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train  # noqa: E402  (the recipe's own corpus and split)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="the text file to write")
    ap.add_argument("--work", default="/tmp/tandem-bundled-work", help="scratch directory")
    ap.add_argument("--deb", help="r-cran-janeaustenr .deb (as train.py's --deb)")
    ap.add_argument("--seed", type=int, default=1234, help="train.py's --seed")
    ap.add_argument("--chat-fraction", type=float, default=0.3, help="train.py's --chat-fraction")
    args = ap.parse_args()

    os.makedirs(args.work, exist_ok=True)
    pkg_dir, source = train.locate_janeaustenr(args.deb, args.work)
    data = train.r_lazyload(os.path.join(pkg_dir, "data"))
    novels = {name: train.novel_paragraphs(data[name]) for name in train.NOVELS}
    # train.py seeds `random` and builds the documents with a fresh Random(seed) first.
    random.seed(args.seed)
    _, held_out = train.build_documents(novels, random.Random(args.seed), args.chat_fraction,
                                        val_every=50)
    plain = [text for kind, text in held_out if kind == "plain"]
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("\n\n".join(plain) + "\n")
    print("%s: %d of the %d held-out documents (the plain ones), %d characters, from %s" % (
        args.out, len(plain), len(held_out), sum(len(t) for t in plain), source))


if __name__ == "__main__":
    main()
