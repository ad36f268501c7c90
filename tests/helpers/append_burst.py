"""Child process for the crash test: append messages forever, printing each acknowledged id.

Usage: python -m tests.helpers.append_burst PROJECT CONVERSATION_ID
An id is printed only after `append` returned, i.e. after the line was fsync'ed.
"""

from __future__ import annotations

import sys

from core.model import ConversationMessage
from core.store.project import Project


def main() -> None:
    project = Project.open(sys.argv[1])
    conv_id = sys.argv[2]
    i = 0
    while True:
        msg = ConversationMessage(role="user", content=f"burst {i} " + "x" * (i % 5000))
        project.conversations.append(conv_id, msg)
        sys.stdout.write(msg.id + "\n")
        sys.stdout.flush()
        i += 1


if __name__ == "__main__":
    main()
