"""The privacy audit: detection of re-spelled names and obfuscated addresses, false positives on
clean text, and cost on a release-sized set of strings.

Detection: every re-spelling of ``tests/support/privacy_corpus.py`` (each of the 50 people of
``tests/release/fixtures/privacy/people.csv`` in 14-17 name forms and 11 address forms, inside a
sentence), counted per form: found with the right person (names, known addresses) or found as
an address (unknown ones). The audit before issue 20 (exact two-word names, a plain address
regex) is run on the same strings as a baseline.

False positives: the clean corpus (hand-written sentences plus sentences generated from
templates and a word list of surnames that are ordinary words), audited against the fixture's
people together with every person of a SYNTHETIC world; a flagged sentence is a false positive.
Then, as text nobody wrote for this test, every docstring paragraph of the Python standard
library against the fixture's people and 12,000 SYNTHETIC ones: a name hit there is false.
Then a hostile roster (every ordinary word of ``common_words.txt`` as the surname of each of
155 given names, ~50k people) against both corpora. Then the real titles and abstracts of both
public benchmarks (the whole CMU gold standard, the LR-bench sample), addresses redacted as a
rebuild releases them, against the people a rebuild of each makes and against 12,000 SYNTHETIC
ones: a blocking hit there stops a release of public text.

Scale: a release-shaped set of tables from the SYNTHETIC generator (``--papers`` papers with
title and abstract, one reviewer per five papers with twelve publications each: about 100k
strings) audited against every person of that world (1.2 per paper, ~7% homonyms), with
re-spellings of world people planted in some abstracts: time, strings per second, planted ones
found, and hits elsewhere (false positives on generated abstracts).

    .venv/bin/python -m benchmarks.privacy_bench [--papers 10000]
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import resource
import sys
import sysconfig
import time
from collections import Counter
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import polars as pl

from revbench.synth.vocab import FIRST_NAMES
from revbench.synth.draw import Generator, WorldSpec
from revbench.tasks.privacy import NOTE_KINDS, Auditor, privacy_audit
from revbench.tasks.privacy_names import common_words
from tests.support.privacy_corpus import GIVEN_WORDS, clean_sentences, email_respellings, name_respellings, people

RESULTS = Path(__file__).resolve().parent / "results"

ENGLISH_GIVEN = ["Robert", "James", "John", "David", "Michael", "Linda", "Susan", "Karen", "Thomas", "Richard", "Paul",
                 "Steven", "Andrew", "Joseph", "George", "Edward", "Brian", "Kevin", "Jason", "Ryan", "Gary", "Eric",
                 "Stephen", "Larry", "Justin", "Scott", "Frank", "Raymond", "Gregory", "Samuel", "Patrick", "Peter"]


class OldAudit:
    """The audit as it was before issue 20: exact word n-grams of the (two-word or longer)
    names, lower-cased, and one address regex."""

    EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
    WORD = re.compile(r"\w+")

    def __init__(self, names: list[str]):
        words = {tuple(self.WORD.findall(n.lower())) for n in names}
        self.phrases = {w for w in words if len(w) >= 2}
        self.lengths = sorted({len(w) for w in self.phrases})

    def scan(self, text: str) -> list[str]:
        out = ["email"] if self.EMAIL.search(text) else []
        tokens = tuple(self.WORD.findall(text.lower()))
        if any(tokens[i:i + n] in self.phrases for n in self.lengths for i in range(len(tokens) - n + 1)):
            out.append("person_name")
        return out


def detection(auditor: Auditor, old: OldAudit) -> dict[str, Any]:
    """Share of re-spellings found, per form and overall, by the audit and by the old one."""
    per: dict[str, Counter[str]] = {}
    missed = []
    for kind, rows in (("name", name_respellings()), ("email", email_respellings())):
        for pid, form, text in rows:
            c = per.setdefault(f"{kind}:{form}", Counter())
            c["n"] += 1
            hits = [h for h in auditor.scan(text) if h[0] == ("person_name" if kind == "name" else "email")]
            ok = bool(hits) and (not pid or any(pid in h[3].split(",") for h in hits))
            c["found"] += ok
            c["old_found"] += ("person_name" if kind == "name" else "email") in old.scan(text)
            if not ok:
                missed.append(text)
    n, f, o = (sum(c[k] for c in per.values()) for k in ("n", "found", "old_found"))
    return {"respellings": n, "found": f, "detection": round(f / n, 4), "old_audit_found": o,
            "old_audit_detection": round(o / n, 4),
            "by_form": {k: {"n": c["n"], "found": c["found"], "old_found": c["old_found"]} for k, c in sorted(per.items())},
            "missed_examples": missed[:12]}


def world_people(g: Generator, n: int) -> pl.DataFrame:
    ps = g.people(n)
    return pl.DataFrame({"person_id": [p.pid for p in ps],
                         "name": [f"{p.first} {p.last}" for p in ps], "email": [p.emails[0] for p in ps]})


def false_positives(world: pl.DataFrame) -> dict[str, Any]:
    """Clean sentences flagged, against the fixture's people and a SYNTHETIC world's."""
    everyone = pl.concat([people(), world])
    auditor = Auditor(everyone, [])
    corpus = clean_sentences()
    flagged = [(s, auditor.scan(s)) for s in corpus]
    flagged = [(s, h) for s, h in flagged if h]
    return {"sentences": len(corpus), "hand_written": len(clean_sentences(generated=0)), "people": everyone.height,
            "flagged": len(flagged), "false_positive_rate": round(len(flagged) / len(corpus), 4),
            "flagged_examples": [[s, [list(x) for x in h]] for s, h in flagged[:10]]}


def stdlib_paragraphs() -> list[str]:
    """Every docstring paragraph (over 40 characters) of the Python standard library's own
    modules, tests left out: ordinary technical English written by people none of whom is in
    the fixture or the SYNTHETIC world, with real addresses and IP addresses in it."""
    lib = Path(sysconfig.get_paths()["stdlib"])
    out = []
    for path in sorted(lib.rglob("*.py")):
        if "test" in path.parts or "tests" in path.parts or "site-packages" in path.parts:
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and \
                    (doc := ast.get_docstring(node)):
                out += [p.strip() for p in re.split(r"\n\s*\n", doc) if len(p.strip()) > 40]
    return out


def stdlib_false_positives(world: pl.DataFrame) -> dict[str, Any]:
    """Names flagged in the standard library's docstrings (false: nobody there is one of these
    people), and how many true identifiers (addresses, IP addresses) were found beside them."""
    auditor = Auditor(pl.concat([people(), world]), [])
    paras = stdlib_paragraphs()
    t0 = time.perf_counter()
    scans = [(p, auditor.scan(p)) for p in paras]
    seconds = time.perf_counter() - t0
    names = [(p, [h for h in hs if h[0] == "person_name"]) for p, hs in scans]
    names = [(p, hs) for p, hs in names if hs]
    kinds = Counter(h[0] for _, hs in scans for h in hs if h[0] != "person_name")
    return {"python": sys.version.split()[0], "paragraphs": len(paras), "characters": sum(map(len, paras)),
            "people": world.height + people().height, "seconds": round(seconds, 2),
            "paragraphs_with_a_name_hit": len(names), "name_false_positive_rate": round(len(names) / len(paras), 5),
            "name_examples": [[p[:160], [list(h) for h in hs]] for p, hs in names[:10]],
            "other_identifiers_found": dict(sorted(kinds.items()))}


def hostile_roster() -> pl.DataFrame:
    """A warehouse no real one is as bad as: every ordinary word of four letters or more in
    ``common_words.txt`` as the surname of every given name (the generator's 91, the ordinary
    words "Will", "Mark", "Rose"... and 32 common English ones)."""
    surnames = sorted(w for w in common_words() if len(w) > 3)
    given = [*FIRST_NAMES, *(g.capitalize() for g in GIVEN_WORDS), *ENGLISH_GIVEN]
    rows = [(f"hostile_{i}_{j}", f"{g} {s.capitalize()}", None) for i, s in enumerate(surnames) for j, g in enumerate(given)]
    return pl.DataFrame(rows, schema={"person_id": pl.Utf8, "name": pl.Utf8, "email": pl.Utf8}, orient="row")


def hostile_false_positives() -> dict[str, Any]:
    """Name hits in the clean corpus and the standard library's docstrings against the hostile roster."""
    roster = hostile_roster()
    auditor = Auditor(roster, [])
    out: dict[str, Any] = {"people": roster.height}
    for name, corpus in (("clean_corpus", clean_sentences()), ("stdlib_docstrings", stdlib_paragraphs())):
        flagged = [(p, [h for h in auditor.scan(p) if h[0] == "person_name"]) for p in corpus]
        flagged = [(p, hs) for p, hs in flagged if hs]
        out[name] = {"texts": len(corpus), "with_a_name_hit": len(flagged), "rate": round(len(flagged) / len(corpus), 5),
                     "examples": [[p[:160], sorted({h[2] for h in hs})] for p, hs in flagged[:10]]}
    return out


def scale(papers: int) -> dict[str, Any]:
    """The audit over a release-shaped set of generated tables, with planted re-spellings."""
    g = Generator(WorldSpec(n_papers=papers, seed=11, start=date(2026, 1, 1), end=date(2026, 6, 30)))
    world = world_people(g, int(papers * 1.2))
    texts = []
    for i in range(papers + (papers // 5) * 12):
        topic = g.topic_ids[i % len(g.topic_ids)]
        title = g.title(topic)
        texts.append((title, g.abstract(topic, title)))
    # Every 50th paper's abstract carries one world person's name, re-spelled as "Last, F." or
    # "F. Last", or their address obfuscated.
    planted = {}
    rows = world.rows()
    for k, i in enumerate(range(0, papers, 50)):
        pid, name, email = rows[(k * 37) % len(rows)]
        first, last = name.split(" ", 1)
        text = [f"{last}, {first[0]}.", f"{first[0]}. {last}", email.replace("@", " [at] ").replace(".", " [dot] ")][k % 3]
        planted[i] = pid
        texts[i] = (texts[i][0], f"{texts[i][1]} We thank {text} for discussions.")
    tables = {
        "papers": pl.DataFrame({"paper_id": [f"p_{i:016x}" for i in range(papers)],
                                "arxiv_id": [f"2601.{i:05d}" for i in range(papers)],
                                "title": [t for t, _ in texts[:papers]], "abstract": [a for _, a in texts[:papers]],
                                "category": ["cs.CL"] * papers}),
        "reviewers": pl.DataFrame({"reviewer_id": [f"r_{r:016x}" for r in range(papers // 5)], "publications": [
            [{"title": t, "abstract": a, "year": 2025} for t, a in texts[papers + 12 * r:papers + 12 * (r + 1)]]
            for r in range(papers // 5)]}),
    }
    t0 = time.perf_counter()
    hits, strings = privacy_audit(tables, world, [])
    seconds = time.perf_counter() - t0
    by_row: dict[int, set[str]] = {}
    for h in hits:
        if h.table == "papers":
            by_row.setdefault(h.row, set()).update(h.person.split(","))
    found = sum(planted[i] in by_row.get(i, set()) for i in planted)
    elsewhere = [h for h in hits if not (h.table == "papers" and h.row in planted)]
    return {"papers": papers, "reviewers": papers // 5, "people": world.height, "strings": strings,
            "seconds": round(seconds, 2), "strings_per_s": round(strings / seconds),
            "planted": len(planted), "planted_found": found,
            "hits_elsewhere": len(elsewhere), "examples_elsewhere": [[h.field, h.kind, h.found] for h in elsewhere[:5]]}


PUBLIC = {"goldstandard": Path("../shared/external/goldstandard-full"), "lrbench": Path("../shared/external/lrbench-sample")}
"""The public benchmarks' real text (as laid beside the project; the LR-bench sample stands in for
the whole file, which has the same kind of text)."""


def public_texts(kind: str, path: Path) -> list[str]:
    """Every distinct title and abstract of a public benchmark: its submissions and profiles."""
    from revbench.evaluation.importers.registry import load_benchmark

    bench = load_benchmark(kind, path)
    texts = [*bench.submissions["title"].to_list(), *bench.submissions["abstract"].to_list()]
    for d in bench.draws[:1]:
        texts += [*d["title"].to_list(), *d["abstract"].to_list()]
    return list(dict.fromkeys(t for t in texts if t))


def real_abstracts(world: pl.DataFrame) -> dict[str, Any]:
    """The audit on the real titles and abstracts of both public benchmarks, as a rebuild releases
    them (addresses redacted by REVBENCH_RELEASE__REDACT_ADDRESSES, as the rebuild sets it):
    blocking hits against the people a rebuild of each makes (its synthesised respondents) with
    the fixture's, which must be none, then against 12,000 SYNTHETIC people (names that real text
    may happen to spell), with the institutions noted and the addresses redacted."""
    from revbench.evaluation.importers.registry import load_benchmark
    from revbench.synth.imported import plan_world
    from revbench.tasks.release import redact_addresses_in

    out: dict[str, Any] = {}
    for kind, path in PUBLIC.items():
        if not path.exists():
            out[kind] = {"skipped": f"{path} is not there"}
            continue
        texts = public_texts(kind, path)
        planned, _papers, _of = plan_world(load_benchmark(kind, path, strict=True), 7)
        respondents = pl.DataFrame({"person_id": [p.pid for p in planned], "name": [f"{p.first} {p.last}" for p in planned],
                                    "email": [p.emails[0] for p in planned]})
        redacted = [redact_addresses_in(t) for t in texts]
        row: dict[str, Any] = {"texts": len(texts), "characters": sum(map(len, texts)),
                               "texts_with_an_address": sum(r != t for r, t in zip(redacted, texts, strict=True))}
        for roster, people_ in (("rebuild_respondents", pl.concat([people(), respondents])),
                                ("synthetic_12000", pl.concat([people(), world]))):
            auditor = Auditor(people_, [])
            scans = [(t, auditor.scan(t)) for t in redacted]
            blocking = [(t, [h for h in hs if h[0] not in NOTE_KINDS]) for t, hs in scans]
            blocking = [(t, hs) for t, hs in blocking if hs]
            row[roster] = {"people": people_.height, "texts_blocked": len(blocking),
                           "false_positive_rate": round(len(blocking) / len(texts), 5),
                           "kinds": dict(Counter(h[0] for _, hs in blocking for h in hs)),
                           "examples": [[t[:160], [list(h) for h in hs]] for t, hs in blocking[:8]]}
        out[kind] = row
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--papers", type=int, default=10000, help="papers of the release-shaped tables (100k strings at 10000)")
    args = p.parse_args()
    fixture = people()
    auditor = Auditor(fixture, [])
    old = OldAudit(fixture["name"].to_list())
    g = Generator(WorldSpec(n_papers=2000, seed=5))
    result = {"when": datetime.now(UTC).isoformat(timespec="seconds"),
              "command": "python -m benchmarks.privacy_bench " + " ".join(sys.argv[1:]),
              "detection": detection(auditor, old),
              "false_positives": false_positives(world_people(g, 2400)),
              "stdlib_docstrings": stdlib_false_positives(world_people(Generator(WorldSpec(n_papers=10000, seed=5)), 12000)),
              "hostile_roster": hostile_false_positives(),
              "real_abstracts": real_abstracts(world_people(Generator(WorldSpec(n_papers=10000, seed=5)), 12000)),
              "scale": scale(args.papers),
              "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}
    print(json.dumps(result, indent=1))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "privacy.json").write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
