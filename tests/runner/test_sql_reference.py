"""docs/sql-reference.md against the database: the reference stays true.

Every public function of schema runlane (pg_proc: not `_…`, not `tg_…`, every overload)
must be in the reference's "Function reference" with its signature: the same argument
names and types in the same order, defaults on the same arguments and equal to the
database's, the same result type. Nothing may be documented that the database does not
have. Each function's section names the role that may execute it (checked against the
grants), and lists every SQLSTATE its file (or a private helper it calls) raises, and
55P03 when it waits for a lock under its own lock_timeout.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent.parent
REFERENCE = ROOT / "docs" / "sql-reference.md"
FUNCTIONS_DIR = ROOT / "sql" / "functions"
ROLES = ("runlane_api", "runlane_worker")
# Codes a helper raises that the function calling it can never trigger, and why.
# Raised by every runlane_api function (runlane._api_org) and claim_runs: documented once,
# in the code table at the top of the reference, not in each section.
EVERY_CALL = {"42501"}
UNREACHABLE = {
    ("cancel_run", "22023"): "_close_run_with refuses an unknown outcome; cancel_run passes "
    "'canceled'",
    # _lock_thread refuses a new thread row whose agent is gone; these lock the threads of
    # unfinished runs, whose agents cannot be erased meanwhile (55006)
    ("claim_runs", "RL008"): "the thread of a run being claimed has a live agent",
    ("reap_stale", "RL008"): "the thread of a running run has a live agent",
    ("cancel_redundant_timer_runs", "RL008"): "a timer run's thread has a live agent",
}

CATALOG = """
select p.proname, pg_get_function_arguments(p.oid), pg_get_function_result(p.oid),
       has_function_privilege('runlane_api', p.oid, 'execute'),
       has_function_privilege('runlane_worker', p.oid, 'execute')
from pg_proc as p
where p.pronamespace = 'runlane'::regnamespace and p.proname !~ '^(_|tg_)'
"""


def _split_top(text: str, sep: str = ",") -> list[str]:
    """Split at `sep` outside parentheses, brackets and quotes."""
    parts, depth, quoted, start = [], 0, False, 0
    for i, ch in enumerate(text):
        if ch == "'":
            quoted = not quoted
        elif not quoted and ch in "([":
            depth += 1
        elif not quoted and ch in ")]":
            depth -= 1
        elif not quoted and depth == 0 and ch == sep:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _closing(text: str, open_at: int) -> int:
    """Index of the parenthesis closing the one at open_at."""
    depth, quoted = 0, False
    for i in range(open_at, len(text)):
        ch = text[i]
        if ch == "'":
            quoted = not quoted
        elif not quoted and ch == "(":
            depth += 1
        elif not quoted and ch == ")":
            depth -= 1
            if depth == 0:
                return i
    raise ValueError(f"unbalanced parentheses in {text!r}")


def _arguments(text: str) -> list[tuple[str, str, str | None]]:
    """(name, type, default or None) of each argument of `name type [default expr]`."""
    args = []
    for arg in _split_top(text):
        name, rest = arg.split(" ", 1)
        match = re.search(r"\s+default\s+", rest, re.I)
        if match:
            args.append((name, rest[: match.start()].strip(), rest[match.end() :].strip()))
        else:
            args.append((name, rest.strip(), None))
    return args


def _signatures(block: str) -> list[tuple[str, str, str]]:
    """(name, arguments text, result text) of each `runlane.f(…) returns …` in a block."""
    found = []
    for match in re.finditer(r"runlane\.(\w+)\(", block):
        close = _closing(block, match.end() - 1)
        after = re.match(r"\s*returns\s+", block[close + 1 :], re.I)
        assert after, f"no 'returns' after runlane.{match.group(1)}(…) in the reference"
        start = close + 1 + after.end()
        if block[start:].lower().startswith("table("):
            end = _closing(block, start + len("table")) + 1
        else:
            end = start + len(block[start:].split("\n", 1)[0])
        found.append((match.group(1), block[match.end() : close], block[start:end].strip()))
    return found


def _sections() -> dict[str, str]:
    """The text of each `#### name` section of the function reference."""
    text = REFERENCE.read_text()
    assert "\n## Function reference\n" in text
    reference = text.split("\n## Function reference\n", 1)[1]
    reference = re.split(r"\n## ", reference, maxsplit=1)[0]
    parts = re.split(r"^#### (\S+)\s*$", reference, flags=re.M)
    sections: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        assert name not in sections, f"{name} has two sections in the reference"
        sections[name] = body
    return sections


def _documented() -> list[tuple[str, str, str]]:
    found = []
    for name, body in _sections().items():
        blocks = re.findall(r"^```sql\n(.*?)^```", body, re.S | re.M)
        signatures = [sig for block in blocks for sig in _signatures(block)]
        assert signatures, f"the section of {name} shows no signature"
        assert {sig[0] for sig in signatures} == {name}, f"the section of {name} shows others"
        found.extend(signatures)
    return found


class Normalizer:
    def __init__(self, conn):
        self.conn = conn

    def type(self, text: str) -> str:
        text = text.strip()
        if text.lower().startswith("setof "):
            return "setof " + self.type(text[6:])
        if text.lower().startswith("table("):
            inner = text[text.index("(") + 1 : text.rindex(")")]
            return (
                "table(" + ", ".join(f"{n} {self.type(t)}" for n, t, _ in _arguments(inner)) + ")"
            )
        resolved = self.conn.execute(
            "select format_type(to_regtype(%s), null)", (text,)
        ).fetchone()[0]
        assert resolved is not None, f"unknown type {text!r}"
        return resolved

    def key(self, name: str, arguments: str) -> str:
        """The identity of an overload: name and argument types, as regprocedure has it."""
        return f"{name}({','.join(self.type(t) for _, t, _ in _arguments(arguments))})"

    def same_value(self, typ: str, documented: str, actual: str) -> bool:
        return self.conn.execute(
            f"select ({documented})::{typ} is not distinct from ({actual})::{typ}"
        ).fetchone()[0]


@pytest.fixture
def catalog(conn):
    return {
        Normalizer(conn).key(name, args): (name, args, result, api, worker)
        for name, args, result, api, worker in conn.execute(CATALOG).fetchall()
    }


def _skeleton(name: str, args: str, result: str, api: bool, worker: bool) -> str:
    """A section to paste into the reference for an undocumented function."""
    roles = (
        " and ".join(f"`{role}`" for role, ok in zip(ROLES, (api, worker), strict=True) if ok)
        or "the schema owner only"
    )
    args = re.sub(r" DEFAULT ", " default ", args)
    result = re.sub(r"^TABLE\(", "table(", re.sub(r"^SETOF ", "setof ", result))
    return (
        f"#### {name}\n\n```sql\nrunlane.{name}({args})\n    returns {result}\n```\n\n"
        f"What it guarantees.\n\n**Role:** {roles}. **Errors:** the codes it raises.\n"
    )


def test_every_public_function_is_documented_and_nothing_else(conn, catalog):
    norm = Normalizer(conn)
    documented = [norm.key(name, args) for name, args, _ in _documented()]
    assert len(documented) == len(set(documented)), "an overload is documented twice"
    missing = sorted(set(catalog) - set(documented))
    assert missing == [], "public functions missing from docs/sql-reference.md; a start:\n\n" + (
        "\n".join(_skeleton(*catalog[key]) for key in missing)
    )
    assert sorted(set(documented) - set(catalog)) == [], "documented functions not in the db"


def test_each_documented_signature_is_the_database_one(conn, catalog):
    norm = Normalizer(conn)
    wrong = []
    for name, args, result in _documented():
        key = norm.key(name, args)
        if key not in catalog:
            continue  # reported by the test above
        _, db_args, db_result, _, _ = catalog[key]
        doc, db = _arguments(args), _arguments(db_args)
        if [n for n, _, _ in doc] != [n for n, _, _ in db]:
            wrong.append(f"{key}: argument names {[n for n, _, _ in doc]}")
        for (arg, typ, doc_default), (_, _, db_default) in zip(doc, db, strict=True):
            if (doc_default is None) != (db_default is None):
                wrong.append(f"{key}: {arg} default {doc_default!r}, database {db_default!r}")
            elif doc_default is not None and not norm.same_value(typ, doc_default, db_default):
                wrong.append(f"{key}: {arg} default {doc_default!r} is not {db_default!r}")
        if norm.type(result) != norm.type(db_result):
            wrong.append(f"{key}: returns {result!r}, database {db_result!r}")
    assert wrong == []


def _role_line(body: str) -> str:
    match = re.search(r"^\*\*Role:\*\*(.*)$", body, re.M)
    assert match, "a section without a **Role:** line"
    return match.group(1)


def _errors(body: str) -> str:
    """The section's **Errors:** paragraph, up to its **Role:** line."""
    match = re.search(r"^\*\*Errors:\*\*(.*?)^\*\*Role:\*\*", body, re.S | re.M)
    assert match, "a section without **Errors:** followed by **Role:**"
    return match.group(1)


def test_each_section_names_the_roles_that_may_execute_it(catalog):
    sections = _sections()
    wrong = {}
    for name, _args, _result, api, worker in catalog.values():
        granted = {role for role, ok in zip(ROLES, (api, worker), strict=True) if ok}
        line = _role_line(sections[name]) if name in sections else ""
        named = {
            role
            for role in ROLES
            if re.search(rf"`{role}`", line) and not re.search(rf"(neither|nor) `{role}`", line)
        }
        if named != granted:
            wrong[name] = {"documented": sorted(named), "granted": sorted(granted)}
    assert wrong == {}


def _raised_codes() -> dict[str, set[str]]:
    """Per public function: the SQLSTATEs its file and the helpers it calls raise."""
    files = {path.stem: path.read_text() for path in FUNCTIONS_DIR.rglob("*.sql")}

    def closure(name: str, seen: set[str]) -> set[str]:
        text = files[name]
        codes = set(re.findall(r"errcode\s*=\s*'([0-9A-Z]{5})'", text))
        if re.search(r"^\s*set lock_timeout", text, re.M):
            codes.add("55P03")
        for helper in set(re.findall(r"runlane\.(_\w+)\s*\(", text)) - seen:
            if helper in files:
                seen.add(helper)
                codes |= closure(helper, seen)
        return codes

    # XX000 marks an internal invariant (a bug), never an answer to a caller.
    return {
        name: closure(name, {name}) - {"XX000"}
        for name in files
        if not name.startswith(("_", "tg_"))
    }


def test_each_section_lists_the_errors_its_function_raises(catalog):
    sections = _sections()
    table = REFERENCE.read_text().split("## Function reference", 1)[0]
    assert all(f"| {code} |" in table for code in EVERY_CALL)
    missing = {}
    for name, codes in _raised_codes().items():
        codes = codes - EVERY_CALL
        if name not in sections:
            continue  # reported by the first test (when the function exists)
        errors = _errors(sections[name])
        absent = sorted(
            code for code in codes if f"`{code}`" not in errors and (name, code) not in UNREACHABLE
        )
        if absent:
            missing[name] = absent
    assert missing == {}
