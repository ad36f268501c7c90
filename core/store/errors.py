"""The store's exceptions: one base, specific subclasses, each message a sentence for the user."""


class StoreError(Exception):
    """Base of everything the store raises on purpose."""


class ProjectPathError(StoreError):
    """The project path cannot hold a project (it is a file, or cannot be written)."""


class ReadOnlyError(StoreError):
    """A write was attempted on a project opened read-only; the message says why it is."""


class ConversationNotFound(StoreError):
    """No conversation has that id (or the id prefix is ambiguous)."""
