"""The store's exceptions: one base, specific subclasses, each message a sentence for the user."""


class StoreError(Exception):
    """Base of everything the store raises on purpose."""


class ProjectPathError(StoreError):
    """The project path cannot hold a project (it is a file, or cannot be written)."""


class ReadOnlyError(StoreError):
    """A write was attempted on a project opened read-only; the message says why it is."""


class ConversationNotFound(StoreError):
    """No conversation has that id (or the id prefix is ambiguous)."""


class ConversationUnreadable(StoreError):
    """A conversation's log cannot be read at all (a folder where the file should be, no
    permission, an I/O error); the message names the file and the reason."""


class StoreWriteError(StoreError):
    """Writing to the project failed (a full disk, no permission, a read-only file system).

    Attributes:
        errno: the operating system's error number, when there was one.
        cause: the reason in a few plain words ("the disk is full").
    """

    def __init__(self, message: str, errno: int | None = None, cause: str = "") -> None:
        super().__init__(message)
        self.errno = errno
        self.cause = cause or message


def describe_os_error(e: OSError) -> str:
    """An OSError in plain words, without the Python noise."""
    import errno as codes

    return {
        codes.ENOSPC: "the disk is full",
        codes.EDQUOT: "the disk quota is used up",
        codes.EACCES: "permission denied",
        codes.EPERM: "the file is not writable (immutable or protected)",
        codes.EROFS: "the disk is read-only",
        codes.ENOTDIR: "part of the path is a file, not a folder",
        codes.EISDIR: "a folder is where a file should be",
        codes.EIO: "the disk reported an input/output error",
    }.get(e.errno or 0, e.strerror or str(e))
