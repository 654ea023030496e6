"""docs/troubleshooting.md quotes the one-line errors a user can meet: each must still be one that the code prints.

A message is matched by its word triples against the source (messages are built from f-strings and wrapped over
lines, so an exact match would miss most): a message that was reworded or removed in the code loses most of its
triples and fails here, naming it."""

from __future__ import annotations

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
PAGE = REPO_ROOT / "docs" / "troubleshooting.md"
SOURCES = ("training", "infra", "plugins", "dags")
OTHER_PROGRAMS = "own message"  # Spark's and YARN's messages, quoted as they print them
LEAST_SHARE_FOUND = 0.5


def _words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z0-9_]+", text)


def _source_triples() -> set[tuple[str, ...]]:
    texts = []
    for folder in SOURCES:
        for path in sorted((REPO_ROOT / folder).rglob("*")):
            if path.suffix in (".py", ".sh"):
                text = re.sub(r"[\"']\s*\n\s*[rbfu]*[\"']", "", path.read_text())  # a literal wrapped over lines
                texts.append(re.sub(r"\\\n\s*", "", text))  # a shell line continued
    words = _words("\n".join(texts))
    return set(zip(words, words[1:], words[2:], strict=False))


def _quoted_messages() -> list[str]:
    rows = [re.match(r"\| `(.+?)` \|(.*)", line) for line in PAGE.read_text().splitlines()]
    return [row.group(1) for row in rows if row and OTHER_PROGRAMS not in row.group(2)]


def _triples(message: str) -> list[tuple[str, ...]]:
    triples = []
    for part in re.split(r"<[^>]*>|…", message):  # placeholders and elisions split a message
        words = _words(part)
        triples += zip(words, words[1:], words[2:], strict=False)
    return triples


def test_every_quoted_message_is_one_the_code_prints():
    known = _source_triples()
    messages = _quoted_messages()
    assert len(messages) >= 25
    missing = []
    for message in messages:
        triples = _triples(message)
        if triples and sum(triple in known for triple in triples) / len(triples) < LEAST_SHARE_FOUND:
            missing.append(message)
    assert not missing, f"quoted in docs/troubleshooting.md but not printed by the code: {missing}"


def test_a_reworded_message_would_be_caught():
    known = _source_triples()
    invented = "data_root=<value>: the moon is made of green cheese and refuses every dataset"
    triples = _triples(invented)
    assert sum(triple in known for triple in triples) / len(triples) < LEAST_SHARE_FOUND
