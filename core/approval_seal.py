"""Which remembered approvals the app itself wrote.

"Allow for this conversation" is remembered in the log: a tool result with
`approval="conversation"`. A project folder can come from anywhere: a cloned repository can ship
a `.workbench/` whose conversation already "allows" `run_shell`. So an allowance is honoured only
with a seal the app computed when it wrote the entry: an HMAC of the entry's identity under a key
kept in the user's config folder, outside every project, which no file in a project can forge.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from core.model import ConversationMessage

KEY_FILE = "approvals.key"


class ApprovalSeal:
    def __init__(self, key: bytes) -> None:
        self._key = key

    @classmethod
    def in_folder(cls, folder: Path) -> ApprovalSeal:
        """The seal whose key lives in `folder` (made on first use, readable by the user only).
        Where the folder cannot hold it, a key for this process: allowances then last as long
        as it runs, which is safe."""
        path = folder / KEY_FILE
        try:
            key = path.read_bytes()
            if len(key) >= 32:
                return cls(key)
        except OSError:
            pass
        key = secrets.token_bytes(32)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(key)
        except FileExistsError:  # another process made it first: use theirs
            return cls.in_folder(folder) if path.stat().st_size >= 32 else cls(key)
        except OSError:
            pass
        return cls(key)

    def _mac(self, conv_id: str, entry: ConversationMessage) -> str:
        said = "\n".join((conv_id, entry.id, entry.tool_call_id or "", entry.tool_name or "",
                          entry.approval or ""))
        return hmac.new(self._key, said.encode(), hashlib.sha256).hexdigest()

    def sealed(self, conv_id: str, entry: ConversationMessage) -> ConversationMessage:
        """`entry`, sealed when it remembers an allowance."""
        if entry.approval != "conversation":
            return entry
        return entry.model_copy(update={"approval_seal": self._mac(conv_id, entry)})

    def network(self, conv_id: str) -> str:
        """The seal on "commands in this conversation may use the network": a
        `conversation.json` that a cloned project ships cannot carry a valid one."""
        said = f"allow_network\n{conv_id}"
        return hmac.new(self._key, said.encode(), hashlib.sha256).hexdigest()

    def holds(self, conv_id: str, entry: ConversationMessage) -> bool:
        """The entry's allowance was written by this app (for this user)."""
        return entry.approval_seal is not None and hmac.compare_digest(
            entry.approval_seal, self._mac(conv_id, entry))
