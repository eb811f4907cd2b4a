"""``recallql sessions ...``: an agent's sessions over `Database.sessions`.

Reads (list, show, lineage) open the database read-only; writes take the writer lock.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from recallql.cli.common import (
    DEFAULT_DB,
    Command,
    DbOption,
    JsonOption,
    State,
    err,
    fail,
    group_db,
    handled,
    open_db,
    out,
    removed_if_left_empty,
)
from recallql.cli.params import infer
from recallql.sessions.edges import END_REASONS

app = typer.Typer(no_args_is_help=True, help="List, inspect and change agent sessions.",
                  epilog="Each command has --help with examples.")
app.callback()(group_db)  # `recallql sessions --db X list`
SessionArg = Annotated[str, typer.Argument(metavar="SESSION", help="Session id.")]
#: The lifecycle states a session can be in (`SessionSnapshot.status`).
STATUSES = ("open", "closed", "archived")


def _check_status(status: str | None) -> str | None:
    """``--status``'s callback: one of `STATUSES` (a typo would list nothing and look like no
    sessions at all).

    Raises:
        typer.BadParameter: (exit 2) another value, with a did-you-mean.
    """
    from recallql.grammar import did_you_mean

    if status is None or status.lower() in STATUSES:
        return status and status.lower()
    raise typer.BadParameter(f"unknown status {status!r}; {did_you_mean(status, STATUSES)}",
                             param_hint="--status")


def _print(outcome, as_json: bool) -> None:
    from recallql.ui.render import print_outcome, to_json

    if as_json:
        out.print(to_json(outcome, indent=None), markup=False, soft_wrap=True)
    else:
        print_outcome(out, outcome)


@app.command("list", cls=Command, short_help="List sessions, oldest first.")
def list_(
    db: DbOption = DEFAULT_DB,
    status: Annotated[str | None, typer.Option(metavar="STATUS", callback=_check_status,
                                               help="open, closed or archived.")] = None,
    agent: Annotated[str | None, typer.Option(metavar="AGENT",
                                              help="Only this agent's sessions.")] = None,
    limit: Annotated[int | None, typer.Option(min=1, metavar="N", help="At most this many.")
                     ] = None,
    as_json: JsonOption = False,
) -> None:
    """List sessions, oldest first (SHOW SESSIONS with a WHERE from the options).

    \b
    Examples:
      recallql sessions list --status open
      recallql sessions list --agent ops-bot --limit 20 --json
    """
    where = [c for c, v in (("status = :status", status), ("agent_id = :agent", agent)) if v]
    text = "SHOW SESSIONS" + (" WHERE " + " AND ".join(where) if where else "") \
        + (" LIMIT :limit" if limit else "")
    params = {k: v for k, v in (("status", status), ("agent", agent), ("limit", limit)) if v}
    with open_db(db) as database, handled():
        _print(database.execute(text, **params), as_json)


@app.command(cls=Command, short_help="Show a session's snapshot.")
def show(session: SessionArg, db: DbOption = DEFAULT_DB, as_json: JsonOption = False) -> None:
    """Show a session's snapshot: status, keywords, signal sums, entities.

    The same view as the statement SHOW SESSION 'id'.

    \b
    Examples:
      recallql sessions show s-42
      recallql sessions show s-42 --json
    """
    with open_db(db) as database, handled():
        if as_json:
            snap = database.sessions.snapshot(session)
        else:
            outcome = _show(database, "SHOW SESSION :s", session)
    if as_json:
        out.print(snap.model_dump_json(), markup=False, soft_wrap=True)
    else:
        _print(outcome, False)


def _show(database: Any, statement: str, session: str) -> Any:
    """Run SHOW SESSION / SHOW LINEAGE for `session`; an error (no such session) is printed
    as ``error: ...``, without a caret under a statement the user did not write."""
    from recallql.grammar.errors import QueryError

    try:
        return database.execute(statement, s=session)
    except QueryError as exc:
        hint = (exc.hint or "").replace("SHOW SESSIONS lists", "recallql sessions list lists")
        raise fail(f"{exc.message} ({hint})" if hint and not State.json else exc.message
                   ) from None


@app.command(cls=Command, short_help="Show a session's chain of parents.")
def lineage(session: SessionArg, db: DbOption = DEFAULT_DB, as_json: JsonOption = False) -> None:
    """Show a session's chain of parents, and which links continue one conversation.

    A parent that ended with end_reason compression is the same conversation (edge
    continuation); branches, delegations and resets start new ones.

    \b
    Examples:
      recallql sessions lineage s-42
      recallql sessions lineage s-42 --json
    """
    with open_db(db) as database, handled():
        _print(_show(database, "SHOW LINEAGE :s", session), as_json)


@app.command(cls=Command)
def create(
    session: SessionArg,
    agent: Annotated[str, typer.Option(metavar="AGENT", help="The agent's id.")],
    db: DbOption = DEFAULT_DB,
    parent: Annotated[str | None, typer.Option(metavar="SESSION", help="Parent session id.")
                      ] = None,
    source: Annotated[str, typer.Option(metavar="SOURCE", help="cli, tool, subagent, ...")
                      ] = "cli",
    branched_from: Annotated[str | None, typer.Option(
        metavar="SESSION", help="The session this one branched from.")] = None,
    delegate_from: Annotated[str | None, typer.Option(
        metavar="SESSION", help="The session that delegated to this one.")] = None,
    title: Annotated[str | None, typer.Option(metavar="TEXT", help="A title.")] = None,
    meta: Annotated[list[str] | None, typer.Option(metavar="KEY=VALUE",
                                                   help="Metadata entry (repeatable).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Create an open session.

    \b
    Examples:
      recallql sessions create s-42 --agent ops-bot
      recallql sessions create s-43 --agent ops-bot --parent s-42 --meta team=infra
    """
    metadata = {}
    for entry in meta or ():
        key, sep, value = entry.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"expected KEY=VALUE, got {entry!r}", param_hint="--meta")
        metadata[key] = infer(value)
    with removed_if_left_empty(db), open_db(db, write=True, create=True) as database, \
            handled():
        snap = database.sessions.create(session, agent, parent=parent, source=source,
                                        branched_from=branched_from,
                                        delegate_from=delegate_from, metadata=metadata,
                                        title=title)
    if as_json:
        out.print(snap.model_dump_json(), markup=False, soft_wrap=True)
    else:
        parent_note = f", parent {parent}" if parent else ""
        out.print(f"created session {session} (agent {agent}{parent_note}, open)", markup=False)


@app.command(cls=Command, short_help="Add an annotation (keywords for FOR SESSION).")
def annotate(session: SessionArg,
             text: Annotated[str, typer.Argument(help="Annotation; its words become keywords.")],
             db: DbOption = DEFAULT_DB) -> None:
    """Add an annotation; its words become the session's keywords for FOR SESSION.

    \b
    Examples:
      recallql sessions annotate s-42 "postgres upgrade"
    """
    with open_db(db, write=True) as database, handled():
        database.sessions.annotate(session, text)
    out.print(f"annotated session {session}", markup=False)


@app.command(cls=Command, short_help="Record a signal, e.g. a reward on an entity.",
             context_settings={"ignore_unknown_options": True})
def signal(
    session: SessionArg,
    name: Annotated[str, typer.Argument(help="Signal name, e.g. reward.")],
    value: Annotated[float, typer.Argument(help="Signal value, e.g. 1.0 or -1 (a negative "
                                                "number is a value, not an option).")],
    entity: Annotated[str | None, typer.Option(
        metavar="ENTITY", help="What it is about: an item's entity; a text chunk's is its "
        "doc_id (postgres.md after `recallql ingest notes/`).")] = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Record a signal, e.g. a reward on an entity.

    Signals are checked by the signal policy (by default: reward in [-1, 1]); a rejected one
    names the rule.

    \b
    Examples:
      recallql sessions signal s-42 reward 1.0 --entity debian:openssl
      recallql sessions signal s-42 reward -1 --entity postgres.md
    """
    with open_db(db, write=True) as database, handled():
        database.sessions.signal(session, name, value, entity=entity)
    about = f" on {entity}" if entity else ""
    out.print(f"recorded {name} {value:g}{about} in session {session}", markup=False)


def check_reason(reason: str, any_reason: bool) -> str:
    """`reason` when it is a known end reason (or `any_reason`).

    Raises:
        typer.BadParameter: (exit 2) an unknown reason, with a did-you-mean.
    """
    from recallql.grammar import did_you_mean

    if reason.lower() in END_REASONS:
        return reason.lower()
    if any_reason:
        return reason
    raise typer.BadParameter(
        f"unknown end reason {reason!r}; {did_you_mean(reason, END_REASONS)} "
        "(--any-reason records another)", param_hint="--reason")


@app.command(cls=Command)
def close(
    session: SessionArg,
    reason: Annotated[str, typer.Option(
        "--reason", metavar="REASON",
        help="Why it ended: compression (context rotated: the next session continues the "
             "conversation), branched, new_session, session_reset, user_exit, ... (the full "
             "list is checked; see --any-reason).")] = "user_exit",
    any_reason: Annotated[bool, typer.Option(
        "--any-reason", help="Accept an end reason that is not in the known list.")] = False,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Close an open session.

    \b
    Examples:
      recallql sessions close s-42
      recallql sessions close s-41 --reason compression
    """
    reason = check_reason(reason, any_reason)
    with open_db(db, write=True) as database, handled():
        database.sessions.close(session, end_reason=reason, any_reason=True)  # checked above
    out.print(f"closed session {session} ({reason})", markup=False)


@app.command(cls=Command, short_help="Archive a session (its snapshot is frozen).")
def archive(session: SessionArg, db: DbOption = DEFAULT_DB) -> None:
    """Archive a session (closing it first if open); its snapshot is frozen.

    \b
    Examples:
      recallql sessions archive s-42
    """
    with open_db(db, write=True) as database, handled():
        database.sessions.archive(session)
    out.print(f"archived session {session}", markup=False)


def _print_plan(report, older_than: float, as_json: bool) -> None:
    """What a sweep would remove (`--dry-run`): one line per session (times to the second; JSON
    keeps the full value), then the totals."""
    import json

    from recallql.grammar.timestamps import format_timestamp
    from recallql.ui.render import cell

    if as_json:
        out.print(json.dumps({
            "sessions": [{"id": x.id, "last_active": format_timestamp(x.last_active),
                          "conversation": x.conversation, "messages": x.messages}
                         for x in report.swept],
            "messages": report.messages, "kept": list(report.kept)}), markup=False,
            soft_wrap=True)
        return
    for x in report.swept:
        out.print(f"{x.id}  last active {cell(format_timestamp(x.last_active))}  "
                  f"conversation {x.conversation}  "
                  f"{x.messages} message(s)", markup=False, soft_wrap=True)
    noun = "session" if report == 1 else "sessions"
    out.print(f"would remove {int(report)} {noun} and {report.messages} message(s) (last active "
              f"more than {older_than:g} days ago)", markup=False)
    if report.kept:
        out.print(f"would keep {len(report.kept)} inactive session(s) whose conversation is still "
                  "active: " + ", ".join(report.kept[:10])
                  + (" ..." if len(report.kept) > 10 else ""), markup=False, soft_wrap=True)


def _confirmed(plan: Any, older_than: float) -> bool:
    """Ask on stderr whether to remove the `plan`'s sessions: True for yes, False for no.

    Raises:
        typer.Exit: (code 1) no answer: end of input (nothing piped, no terminal) or Ctrl-C.
    """
    import contextlib
    import sys

    noun = "session" if plan == 1 else "sessions"
    try:  # click's confirm(err=True) still writes the space after the prompt to stdout
        with contextlib.redirect_stdout(sys.stderr):
            return typer.confirm(f"remove {int(plan)} {noun} (last active more than "
                                 f"{older_than:g} days ago) with their annotations, signals "
                                 "and messages?", err=True)
    except typer.Abort:  # click's answer to EOF and Ctrl-C at the prompt
        err.print()  # end the prompt's line
        raise fail("no answer (end of input or Ctrl-C); nothing was removed (--yes removes "
                   "without asking)") from None


def _declined(as_json: bool) -> None:
    """What a sweep answered "no" prints: nothing was removed (exit 0, as `rm -i` or `pip
    uninstall` declined: not an error)."""
    if as_json:
        import json

        out.print(json.dumps({"removed": 0, "messages": 0, "ids": [], "detached": []}),
                  markup=False, soft_wrap=True)
    else:
        out.print("nothing removed (answered no)", markup=False)


@app.command(cls=Command, short_help="Remove old conversations (shows how many, asks first).")
def sweep(
    older_than: Annotated[float, typer.Option("--older-than", min=0, metavar="DAYS",
                                              help="Remove sessions whose conversation was last "
                                                   "active (start, end, message, signal or "
                                                   "annotation of any of its sessions) more "
                                                   "than DAYS ago.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")
                   ] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would be removed and "
                                          "change nothing (opens the database read-only).")
                       ] = False,
    db: DbOption = DEFAULT_DB,
    as_json: JsonOption = False,
) -> None:
    """Remove old sessions with their annotations, signals and messages.

    A session's activity is the latest of its start, end, messages, signals and annotations. A
    conversation (a compression chain) goes as a whole: an old session stays while another
    session of its conversation is active. A surviving session whose parent goes (a branch, a
    subagent) loses its parent link and keeps its own conversation.

    Shows how many sessions would go and asks first (--yes does not ask); --dry-run lists them.
    Answering no removes nothing and exits 0; no answer (end of input) exits 1.

    \b
    Examples:
      recallql sessions sweep --older-than 90 --dry-run
      recallql sessions sweep --older-than 90
      recallql sessions sweep --older-than 30 --yes
    """
    if dry_run or not yes:
        with open_db(db) as database, handled():
            plan = database.sessions.sweep(older_than, dry_run=True)
        if dry_run:
            _print_plan(plan, older_than, as_json)
            return
        if not plan:
            out.print(f"no conversation's last activity is more than {older_than:g} days ago; "
                      "nothing to remove", markup=False)
            return
        if not _confirmed(plan, older_than):
            _declined(as_json)
            return
    with open_db(db, write=True) as database, handled():
        removed = database.sessions.sweep(older_than)
    if as_json:
        import json

        out.print(json.dumps({"removed": int(removed), "messages": removed.messages,
                              "ids": removed.ids, "detached": list(removed.detached)}),
                  markup=False, soft_wrap=True)
        return
    out.print(f"removed {removed} session{'s' if removed != 1 else ''}", markup=False)
