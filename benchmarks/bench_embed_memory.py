"""Peak RSS of embedding one large text with the default embedder (MiniLM), against the same
text tokenised whole (what `MiniLMEmbedder` did before it tokenised a prefix) and a one-word
text, each in a fresh process, in the same run (newcomer #28).

    python -m benchmarks.bench_embed_memory [MEGABYTES]

Prints each case's peak RSS (``resource.getrusage``, KiB; Linux) and its excess over the
one-word baseline per byte of text.
"""

from __future__ import annotations

import resource
import subprocess
import sys

CASES = ("one-word", "prefix", "whole")


def child(case: str, megabytes: float) -> None:
    """Embed one text in this process and print the peak RSS in KiB."""
    from recallql.index import embedders

    text = "backup" if case == "one-word" else \
        "backup retention policy " * int(megabytes * 1e6 / 24)
    if case == "whole":  # the encoding of before: the whole text, overflow kept
        embedders.encode_prefixes = lambda tokenizer, texts: tokenizer.encode_batch(list(texts))
    embedders.MiniLMEmbedder()([text])
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def main(megabytes: float = 6.0) -> None:
    """Run each case in a fresh process and print peak RSS and bytes per byte of text."""
    peaks = {}
    for case in CASES:
        out = subprocess.run([sys.executable, "-m", "benchmarks.bench_embed_memory", "--child",
                              case, str(megabytes)], check=True, capture_output=True, text=True)
        peaks[case] = int(out.stdout.split()[-1])
    size = megabytes * 1e6
    for case in CASES:
        excess = (peaks[case] - peaks["one-word"]) * 1024 / size
        print(f"{case:9s} peak RSS {peaks[case]:>9,} KiB  excess {excess:6.1f} B per byte of "
              f"a {megabytes:g} MB text")
    print(f"whole / prefix peak RSS: {peaks['whole'] / peaks['prefix']:.2f}x")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], float(sys.argv[3]))
    else:
        main(*(float(a) for a in sys.argv[1:2]))
