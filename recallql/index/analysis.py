"""The text analyser shared by indexing and query-term extraction, versioned.

Analyser 4 (current), in order:

1. **Normalisation** (`normalize`): Unicode NFKC with case folding and the default-ignorable
   code points removed — ``NFKC(casefold(NFKC(text)))``, the NFKC_Casefold mapping of Unicode
   (UAX #15, UAX #44 ``NFKC_CF``). NFC and NFD spellings, full-width Latin (``ＡＢＣ``),
   ligatures (``ﬁ``), ``ß``/``ss`` and a soft hyphen inside a word all give the same terms.
   Except U+200B ZERO WIDTH SPACE, which becomes a space first: it is a word boundary (UAX #29
   gives it Word_Break=Other, and Thai, Lao, Khmer and Myanmar text marks its word breaks with
   it), so ``foo\\u200bbar`` is ``foo bar``, not ``foobar``. It is the only assigned
   default-ignorable code point that breaks a word: the others are Word_Break Format (soft
   hyphen, the bidi controls, U+2060 WORD JOINER, U+FEFF, ...), Extend (U+200C ZWNJ, the
   variation selectors, U+034F, the tags) or ZWJ (U+200D), which rule WB4 skips, or ALetter
   (the Hangul fillers); the unassigned ones are Other only by default, and stay removed.
   Then the Turkish and Azerbaijani i's are folded to a plain ``i`` (``İ``, whose case fold is
   ``i`` + U+0307, and the dotless ``ı``), as ICU's and Lucene's ASCII folding do, so
   ``İstanbul``, ``ISTANBUL`` and ``istanbul`` and ``KIRMIZI`` / ``kırmızı`` are one term.
2. **CJK bigrams**: a run of Han, Hiragana, Katakana or Hangul characters becomes its
   overlapping two-character pieces (a lone character stays a unigram), as Lucene's
   `CJKBigramFilter` / Elasticsearch's ``cjk_bigram`` do: ``数据库`` → ``数据 据库``, so a word
   inside a run is findable, and no run is one giant token. A run of Thai, Lao, Khmer or
   Myanmar letters (scripts written without spaces between words; a word break needs a
   dictionary) becomes the overlapping bigrams of its characters, each with its vowel and tone
   marks: ``ข้อมูล`` → ``ข้อ อมู มูล``. A zero width space ends a run of either kind, as a
   space does (step 1): the writer marked a word break there, and a bigram across it would be
   a term of no word, the end of one and the start of the next (``ฐาน\\u200bข้อมูล`` →
   ``ฐา าน ข้อ อมู มูล``, without ``นข้``), just as no bigram spans a space.
3. **Long tokens are split, never dropped**: a run of word characters longer than
   `MAX_TOKEN_CHARS` (255, the ``max_token_length`` of Lucene's StandardTokenizer and of
   Elasticsearch's standard tokenizer) is cut into pieces of 255 characters. Git SHAs (40 hex),
   SHA-256 (64 hex), dash-less UUIDs (32 hex) and long words of any script stay whole terms.
   (tantivy itself drops a term above 65,530 bytes; a 255-character piece is at most 1,020.)
4. **Versions, addresses and e-mail stay whole besides their parts** (Elasticsearch's
   ``preserve_original``): an e-mail address and a dotted number (``v1.2.3``, ``10.0.0.1``,
   ``3.14159``; UAX #29 keeps digits joined by a full stop together) are a term of their own
   followed by their parts, ``v1.2.3`` → ``v1.2.3 v1 2 3``, so the exact version ranks above
   the same parts in another order (``v1.3.2``) and ``v1`` alone still finds it. In the whole
   term the separators are default-ignorable marks (``.`` → U+034F, ``@`` → U+FE00, ...):
   they keep it one token and cannot come from normalised text; `shown` puts them back.
5. tantivy: a regex tokenizer, tokens = runs of letters, digits and combining marks
   (``[\\p{L}\\p{N}\\p{M}]+``; every other character splits, as in tantivy's simple tokenizer,
   but a vowel sign or virama does not cut a Devanagari, Thai or Arabic word in two), and each
   emoji (``Extended_Pictographic``; the zero-width joiner of a sequence is default-ignorable,
   so ``👩‍💻`` gives ``👩 💻``; a skin-tone modifier is not a term) and each flag (a pair of
   regional indicators) a token of its own, as in Lucene's StandardTokenizer since 7.0 →
   the `STOPWORDS` list → the English Snowball stemmer.

Analyser 3: as analyser 4 with U+200B removed like every other default-ignorable code point:
``foo\\u200bbar`` is the one term ``foobar``, and Thai words separated by it are one run.

Analyser 2: as analyser 3 without the Turkish i folding, the bigrams of scripts without
spaces, step 4 and the emoji tokens (emoji were separators).

Analyser 1 (databases written before this version): simple tokenizer → ``remove_long(40)``
(tokens of 40 bytes or more silently dropped) → lowercase → Lucene's 33 English stopwords →
English stemmer. A collection records the version its index was built with; `analyze` with
that version keeps old databases consistent until ``recallql reindex`` rebuilds them.
"""

from __future__ import annotations

import functools
import re
import unicodedata

import tantivy

#: Name under which the analyser is registered with every tantivy index.
ANALYZER_NAME = "recallql_en"
#: The analyser new collections use.
CURRENT_VERSION = 4
VERSIONS = (1, 2, 3, 4)
#: What a token is (Rust regex syntax): a run of letters, digits and combining marks.
TOKEN_PATTERN_2 = r"[\p{L}\p{N}\p{M}]+"
#: Analyser 3: those runs, and each emoji and flag a token of its own.
TOKEN_PATTERN = TOKEN_PATTERN_2 + r"|\p{Extended_Pictographic}|\p{Regional_Indicator}{2}"
#: Longest token kept whole, in characters (Lucene / Elasticsearch ``max_token_length``).
MAX_TOKEN_CHARS = 255

#: The Snowball English stop word list (Porter; https://snowballstem.org/algorithms/english/
#: stop.txt, BSD licence), the list made for the Snowball stemmer this analyser uses. It drops
#: question words and auxiliaries (what, which, who, whom, when, where, why, how, do, does,
#: did, is, was, ...) that the 33-word Lucene list keeps, and keeps what the authors left out
#: for homonymy (will, can, may, must, might, us). Its compound forms (``don't``, ``i'm``) are
#: entered as the tokens the tokenizer makes of them, leaving out fragments that are words on
#: their own (can, won, let, haven, don).
_SNOWBALL_ENGLISH = """
i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she
her hers herself it its itself they them their theirs themselves what which who whom this that
these those am is are was were be been being have has had having do does did doing would should
could ought a an the and but if or because as until while of at by for with about against
between into through during before after above below to from up down in out on off over under
again further then once here there when where why how all any both each few more most other
some such no nor not only own same so than too very cannot
s t m re ve d ll isn aren wasn weren hasn hadn doesn didn wouldn shan shouldn couldn mustn
"""
STOPWORDS: frozenset[str] = frozenset(_SNOWBALL_ENGLISH.split())

# Default_Ignorable_Code_Point (Unicode DerivedCoreProperties.txt), removed by NFKC_Casefold.
_IGNORABLE = dict.fromkeys(
    [0x00AD, 0x034F, 0x061C, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x3164, 0xFEFF, 0xFFA0,
     *range(0x180B, 0x1810), *range(0x200B, 0x2010), *range(0x202A, 0x202F),
     *range(0x2060, 0x2070), *range(0xFE00, 0xFE10), *range(0x1BCA0, 0x1BCA4),
     *range(0x1D173, 0x1D17B), *range(0xE0000, 0xE1000)])
#: The same code points as one character class: a regex scan finds none in a text ~10x
#: faster than `str.translate` looks each character up in a 4,000-entry dict.
def _char_class(codes: list[int]) -> str:
    """A regex character class of `codes`, consecutive code points as ranges."""
    ranges: list[list[int]] = []
    for code in sorted(codes):
        if ranges and code == ranges[-1][1] + 1:
            ranges[-1][1] = code
        else:
            ranges.append([code, code])
    return "[" + "".join(re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
                         for a, b in ranges) + "]"


_IGNORABLE_RE = re.compile(_char_class(list(_IGNORABLE)))
_CJK = re.compile(
    "[\u3005-\u3007\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uf900-\ufaff\u1100-\u11ff\u3130-\u318f\uac00-\ud7af\U00020000-\U0003134f]+")
#: Letters and marks of the scripts written without spaces: Thai, Lao, Myanmar, Khmer.
_NO_SPACES = re.compile("[\u0e01-\u0e3a\u0e40-\u0e4e\u0e81-\u0ecf\u1000-\u103f\u1050-\u108f"
                        "\u1780-\u17d3]+")
#: Analyser 4: the default-ignorable code point that is a word boundary (UAX #29 Word_Break=Other).
_ZERO_WIDTH_SPACE = "\u200b"
_TURKISH_I = str.maketrans({"\u0131": "i"})  # dotless ı; İ folds to i + U+0307, removed below
#: E-mail addresses and dotted numbers (versions, IPv4 addresses, decimals). Each starts only
#: where a run starts, so that a long word is scanned once, not once per character.
_EMAIL = re.compile(r"(?<![\w.%+-])[\w.%+-]*[^\W_]@(?:[^\W_]|-)+(?:\.(?:[^\W_]|-)+)+")
_DOTTED = re.compile(r"(?<![^\W_])[^\W_]*\d(?:\.\d+)+[^\W_]*")
_RUN_EXTRA = frozenset(".@_%+-")
#: Letters, digits (``\w`` is `str.isalnum` and ``_``) and `_RUN_EXTRA`: a run's characters.
_RUN_CHARS = re.compile(r"[\w.@%+-]*")
_SEPARATORS = re.compile(r"[.@_%+-]")
#: The whole term keeps its separators as default-ignorable combining marks: inside a token
#: (`TOKEN_PATTERN` keeps marks), and never in normalised text, so no other text gives it.
_JOINERS = str.maketrans({".": "\u034f", "@": "\ufe00", "_": "\ufe01", "%": "\ufe02",
                          "+": "\ufe03", "-": "\ufe04"})
_SHOWN = str.maketrans({v: k for k, v in _JOINERS.items()})
_LONG_ASCII = re.compile(f"[A-Za-z0-9]{{{MAX_TOKEN_CHARS + 1},}}")


def normalize(text: str, version: int = CURRENT_VERSION) -> str:
    """NFKC_Casefold: ``NFKC(casefold(NFKC(text)))`` without default-ignorable code points,
    then (analyser 3) the Turkish ``İ``/``ı`` as ``i``; (analyser 4) a zero width space is a
    space, not removed.

    ``normalize("Ｃａｆé") == normalize("cafe\\u0301") == "café"``,
    ``normalize("İZMİR") == "izmir"``, ``normalize("foo\\u200bbar") == "foo bar"``.
    """
    if text.isascii():
        return text.lower()
    if version >= 4:
        text = text.replace(_ZERO_WIDTH_SPACE, " ")
    folded = _IGNORABLE_RE.sub("", unicodedata.normalize("NFKC", text)).casefold()
    folded = unicodedata.normalize("NFKC", folded)
    if version < 3:
        return folded
    return folded.replace("i\u0307", "i").translate(_TURKISH_I)


@functools.cache
def _long_run() -> re.Pattern[str]:
    """Runs of more than `MAX_TOKEN_CHARS` letters, digits and combining marks (the token
    class of `TOKEN_PATTERN`), built on first non-ASCII use (~50 ms)."""
    marks, start = [], None
    for code in [*range(0x20000), *range(0xE0000, 0xE1001)]:  # the planes that hold marks
        inside = unicodedata.category(chr(code)).startswith("M")
        if inside and start is None:
            start = code
        elif not inside and start is not None:
            marks.append(f"{re.escape(chr(start))}-{re.escape(chr(code - 1))}")
            start = None
    return re.compile(f"(?:[^\\W_]|[{''.join(marks)}]){{{MAX_TOKEN_CHARS + 1},}}")


def _bigrams(match: re.Match[str]) -> str:
    run = match.group(0)
    if len(run) == 1:
        return f" {run} "
    return " " + " ".join(run[i:i + 2] for i in range(len(run) - 1)) + " "


def _cluster_bigrams(match: re.Match[str]) -> str:
    clusters: list[str] = []
    for char in match.group(0):
        if clusters and unicodedata.category(char).startswith("M"):
            clusters[-1] += char  # a vowel or tone mark stays with its letter
        else:
            clusters.append(char)
    if len(clusters) == 1:
        return f" {clusters[0]} "
    return " " + " ".join(a + b for a, b in zip(clusters, clusters[1:], strict=False)) + " "


def _with_parts(match: re.Match[str]) -> str:
    whole = match.group(0)
    parts = _SEPARATORS.sub(" ", whole)
    return f"{whole.translate(_JOINERS)} {parts}" if len(whole) <= MAX_TOKEN_CHARS else parts


def _anchors(text: str) -> list[int]:
    """Where an e-mail address or a dotted number may be: each ``@``, each ``.`` between two
    digits (str.find: a regex over every character costs ~10x more)."""
    found = []
    for char in "@.":
        i = text.find(char)
        while i != -1:
            if char == "@" or (0 < i < len(text) - 1 and text[i - 1].isdigit()
                               and text[i + 1].isdigit()):
                found.append(i)
            i = text.find(char, i + 1)
    return sorted(found)


def _compounds(text: str) -> str:
    """Step 4: each e-mail address and dotted number as its whole term and its parts, found in
    the runs of letters, digits and ``.@_%+-`` around `_anchors`."""
    out, last = [], 0
    for i in _anchors(text):
        if i < last:
            continue
        start, end = i, i + 1
        while start > last and (text[start - 1].isalnum() or text[start - 1] in _RUN_EXTRA):
            start -= 1
        end = _RUN_CHARS.match(text, end).end()  # type: ignore[union-attr]  # `*` always matches
        run = text[start:end]
        if "@" in run:
            run = _EMAIL.sub(_with_parts, run)
        out += [text[last:start], _DOTTED.sub(_with_parts, run)]
        last = end
    return "".join(out) + text[last:] if out else text


def shown(term: str) -> str:
    """A term as EXPLAIN prints it: a version's or address's whole term with its ``.`` and
    ``@`` back (``v1.2.3``)."""
    return term.translate(_SHOWN)


def _split(match: re.Match[str]) -> str:
    run = match.group(0)
    return " ".join(run[i:i + MAX_TOKEN_CHARS] for i in range(0, len(run), MAX_TOKEN_CHARS))


_SPACES = re.compile(r"(\s+)")


_BLOCK = (MAX_TOKEN_CHARS + 1) // 2  # 128


def _has_long_chunk(text: str) -> bool:
    """Whether `text` has a whitespace-free chunk longer than `MAX_TOKEN_CHARS`. Such a chunk
    (≥ 256 characters) covers a whole aligned block ``text[b:b + 128]`` (b a multiple of 128),
    so only a text with a block holding no space is split and measured: ~1.7 µs for a
    600-character text, against ~12 µs for ``max(map(len, text.split()))`` alone."""
    if len(text) <= MAX_TOKEN_CHARS:
        return False
    for start in range(0, len(text) - _BLOCK + 1, _BLOCK):
        block = text[start:start + _BLOCK]
        if " " not in block and not any(char.isspace() for char in block):
            return max(map(len, text.split()), default=0) > MAX_TOKEN_CHARS
    return False


def _split_long(text: str, runs: re.Pattern[str]) -> str:
    """Step 3: every match of `runs` (a run of more than `MAX_TOKEN_CHARS` token characters)
    cut into pieces. Such a run holds no whitespace, so it lies inside one whitespace-free
    chunk longer than `MAX_TOKEN_CHARS`: only those chunks are searched, and a text without one
    (nearly every text) is returned as is. `runs` over the whole text costs ~1–3 µs per
    character for the non-ASCII pattern (a counted repeat of an alternation tried at every
    position). Whether there is such a chunk at all is asked of `_has_long_chunk` first."""
    if not _has_long_chunk(text):
        return text
    return "".join(runs.sub(_split, chunk) if len(chunk) > MAX_TOKEN_CHARS else chunk
                   for chunk in _SPACES.split(text))


def prepare(text: str, version: int = CURRENT_VERSION) -> str:
    """The text handed to tantivy for `version`: steps 1–4 of the module docstring (analyser
    1: the text unchanged)."""
    if version == 1:
        return text
    text = normalize(text, version)
    if text.isascii():
        text = _split_long(text, _LONG_ASCII)
    else:
        text = _CJK.sub(_bigrams, text)
        if version >= 3:
            text = _NO_SPACES.sub(_cluster_bigrams, text)
        text = _split_long(text, _long_run())
    return _compounds(text) if version >= 3 else text


@functools.cache
def analyzer(version: int = CURRENT_VERSION) -> tantivy.TextAnalyzer:
    """The tantivy part of analyser `version` (step 5), built once per process.

    Raises:
        ValueError: an unknown version.
    """
    if version == 1:
        return (tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
                .filter(tantivy.Filter.remove_long(40))
                .filter(tantivy.Filter.lowercase())
                .filter(tantivy.Filter.stopword("english"))
                .filter(tantivy.Filter.stemmer("english"))
                .build())
    if version in VERSIONS:  # 2 and later: the same tokenizer and filters
        pattern = TOKEN_PATTERN_2 if version == 2 else TOKEN_PATTERN
        return (tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(pattern))
                .filter(tantivy.Filter.custom_stopword(sorted(STOPWORDS)))
                .filter(tantivy.Filter.stemmer("english"))
                .build())
    raise ValueError(f"unknown text analyser version {version} (known: {VERSIONS})")


def analyze(text: str, version: int = CURRENT_VERSION) -> list[str]:
    """Turn text into index terms, in order, duplicates kept.

    No character is syntax: ``"C++"`` gives ``["c"]``, ``"OR"`` (a stopword) gives ``[]``.

    Args:
        text: any string.
        version: the analyser version of the collection (default: the current one).

    Returns:
        The terms, e.g. ``analyze("Backup retention policies") == ["backup", "retent", "polici"]``.

    Raises:
        ValueError: an unknown version.
    """
    return analyzer(version).analyze(prepare(text, version))


def describe(version: int) -> str:
    """One line naming what analyser `version` does (for messages and DESCRIBE)."""
    if version == 1:
        return ("analyser 1: simple tokenizer, tokens of 40+ bytes dropped, lowercase, "
                "Lucene's 33 English stopwords, English stemmer")
    if version == 2:
        return (f"analyser 2: NFKC case folding, CJK bigrams, tokens over {MAX_TOKEN_CHARS} "
                "characters split, Snowball English stopwords, English stemmer")
    zwsp = "zero width space as a word break, " if version >= 4 else ""
    return (f"analyser {version}: NFKC case folding with Turkish i folded, {zwsp}CJK and Thai/Lao/"
            f"Khmer/Myanmar bigrams, emoji as terms, versions and e-mail addresses whole besides "
            f"their parts, tokens over {MAX_TOKEN_CHARS} characters split, Snowball English "
            "stopwords, English stemmer")
