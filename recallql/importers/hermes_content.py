"""The text of a Hermes message: plain, structured (``"\\x00json:"`` + JSON) or tool calls.

Hermes 0.19.0 stores a message's ``content`` as plain text, or as the prefix ``"\\x00json:"``
followed by JSON for structured content (text and image parts). A message that only calls tools
(an assistant turn) has NULL content and its calls in ``tool_calls`` (OpenAI's shape, as JSON):
recallql indexes the text of those calls so that what the agent ran stays findable.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any, Final

JSON_CONTENT_PREFIX: Final = "\x00json:"


def decode_content(raw: Any) -> str | None:
    """Message text from a Hermes ``content`` value.

    Plain text is returned as is (NULL as ``""``). ``"\\x00json:"`` + JSON is structured content:
    a string, a list of parts, or one part; the text parts (strings, or ``{"type": "text",
    "text": ...}``) are joined with newlines and other parts (images, ...) are skipped.

    Returns:
        The text, or None when the JSON cannot be decoded.
    """
    if raw is None:
        return ""
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    text = str(raw)
    if not text.startswith(JSON_CONTENT_PREFIX):
        return text
    try:
        value = json.loads(text[len(JSON_CONTENT_PREFIX):])
    except ValueError:
        return None
    parts = value if isinstance(value, list) else [value]
    return "\n".join(t for part in parts if (t := _part_text(part)) is not None)


def tool_calls_text(raw: Any) -> str:
    """The findable text of a message's ``tool_calls`` (Hermes keeps the OpenAI shape as JSON:
    ``[{"type": "function", "function": {"name": ..., "arguments": "<JSON text>"}}]``).

    One line per call: the tool name, a colon, then the argument values (strings and numbers,
    depth first, keys left out), e.g. ``terminal: kubectl get pods -n staging``. Arguments that
    are not JSON are kept as the text they are; text that is not JSON at all is returned
    stripped, so nothing a user could search for is lost.

    Returns:
        The text ("" when there is none).
    """
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    try:
        calls = json.loads(raw)
    except (TypeError, ValueError):
        return str(raw).strip()
    lines = []
    for call in calls if isinstance(calls, list) else [calls]:
        fn = call.get("function", call) if isinstance(call, dict) else {"arguments": call}
        if not isinstance(fn, dict):
            fn = {"arguments": fn}
        name, args = fn.get("name"), fn.get("arguments")
        if isinstance(args, str):
            with contextlib.suppress(ValueError):
                args = json.loads(args)
        values = " ".join(_leaf_text(args))
        head = name if isinstance(name, str) and name else ""
        line = f"{head}: {values}" if head and values else head or values
        if line:
            lines.append(line)
    return "\n".join(lines)


def _leaf_text(value: Any) -> list[str]:
    """Strings and numbers of a JSON value, depth first (iterative), keys left out."""
    out, stack = [], [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if item.strip():
                out.append(item.strip())
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int | float):
            out.append(str(item))
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))
    return out


def _part_text(part: Any) -> str | None:
    if isinstance(part, str):
        return part
    if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
        return part["text"]
    return None
