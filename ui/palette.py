"""Every colour the window draws itself, in a light and a dark scheme, and the one place that
switches between them (View → Theme: System, Light, Dark).

Widgets never name a colour: the painters (rows, the Inspector's bar, the meter, code colours)
read `current()` when they draw, and every style sheet of ours is the application's one sheet,
made here from the palette (widgets are picked by object name or by their `role` property).
Switching re-applies the sheet and Qt's own palette (Fusion's, so Qt's widgets follow too); the
transcript then lays its rows out again (`TranscriptDelegate.forget`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication

SCHEMES = ("system", "light", "dark")


@dataclass(frozen=True)
class Palette:
    name: str  # "light" or "dark"
    base: str  # the transcript's background
    text: str
    muted: str  # secondary text (notes under fields, a row's details)
    faint: str  # tertiary text (times, a done todo)
    link: str
    accent: str  # the chosen mode's button
    border: str
    rows: dict[str, str]  # a row's background, by RowKind value
    row_borders: dict[str, str]
    stopped: str  # a stopped answer's background (neutral)
    error_text: str
    warn_text: str
    ok_text: str
    code_bg: str
    found_bg: str  # a search's matches
    notices: dict[str, tuple[str, str, str]]  # kind -> (background, border, text)
    banner: tuple[str, str, str]  # the read-only banner: background, text, border
    chip: tuple[str, str]  # a held paste: background, border
    editing: tuple[str, str]  # "editing an earlier message": background, border
    todo: tuple[str, str]  # the plan's panel: background, border
    active_step: str  # the run panel's active step
    bar: dict[str, str]  # the Inspector's bar, by part
    meter: dict[str, str]  # the status bar's meter, by state
    syntax: list[tuple[str, str, bool]] = field(default_factory=list)  # Pygments token, colour


LIGHT = Palette(
    name="light", base="#fafafa", text="#18181b", muted="#52525b", faint="#71717a",
    link="#2563eb", accent="#2563eb", border="#d4d4d8",
    rows={"user": "#e8f0fe", "assistant": "#ffffff", "streaming": "#ffffff", "tool": "#f4f4f5",
          "error": "#fdecea", "system": "#f7f3e8"},
    row_borders={"error": "#e0a39b", "tool": "#d4d4d8", "default": "#e4e4e7"},
    stopped="#f4f4f5", error_text="#b42318", warn_text="#b45309", ok_text="#15803d",
    code_bg="#f1f2f4", found_bg="#fde68a",
    notices={"problem": ("#fee2e2", "#fca5a5", "#7f1d1d"),
             "info": ("#e0f2fe", "#7dd3fc", "#0c4a6e")},
    banner=("#fef3c7", "#78350f", "#fcd34d"), chip=("#eef2ff", "#c7d2fe"),
    editing=("#fff7e6", "#f5c16c"), todo=("#f8fafc", "#e4e4e7"), active_step="#dbeafe",
    bar={"system": "#a1a1aa", "instructions": "#14b8a6", "tools": "#f59e0b",
         "summary": "#a855f7", "history": "#3b82f6",
         "draft": "#10b981", "reserved": "#d4d4d8", "free": "#f4f4f5", "other": "#e4e4e7"},
    meter={"normal": "#166534", "warning": "#92400e", "over": "#b91c1c", "pending": "#5f5f68"},
    syntax=[("Comment", "#6b7280", True), ("Literal.String", "#15803d", False),
            ("Literal.Number", "#b45309", False), ("Keyword", "#7c3aed", False),
            ("Name.Builtin", "#0e7490", False), ("Name.Function", "#1d4ed8", False),
            ("Name.Class", "#1d4ed8", False), ("Name.Decorator", "#b45309", False),
            ("Operator.Word", "#7c3aed", False), ("Generic.Inserted", "#15803d", False),
            ("Generic.Deleted", "#b91c1c", False)],
)

DARK = Palette(
    name="dark", base="#18181b", text="#e4e4e7", muted="#a1a1aa", faint="#8b8b94",
    link="#7ab0ff", accent="#2563eb", border="#3f3f46",
    rows={"user": "#1e2a44", "assistant": "#232327", "streaming": "#232327", "tool": "#27272a",
          "error": "#3b1d1d", "system": "#2e2a1f"},
    row_borders={"error": "#7f3b35", "tool": "#3f3f46", "default": "#34343a"},
    stopped="#27272a", error_text="#fca5a5", warn_text="#fbbf24", ok_text="#86efac",
    code_bg="#2c2c31", found_bg="#7a5c00",
    notices={"problem": ("#3b1d1d", "#7f3b35", "#fecaca"),
             "info": ("#0f2a3d", "#1e5a80", "#bae6fd")},
    banner=("#3a2e0b", "#fde68a", "#6b5310"), chip=("#1f2440", "#3b4380"),
    editing=("#3a2c12", "#7a5a1e"), todo=("#1f1f23", "#3f3f46"), active_step="#1e3a5f",
    bar={"system": "#71717a", "instructions": "#0d9488", "tools": "#d97706",
         "summary": "#9333ea", "history": "#2563eb",
         "draft": "#059669", "reserved": "#52525b", "free": "#27272a", "other": "#3f3f46"},
    meter={"normal": "#4ade80", "warning": "#fbbf24", "over": "#f87171", "pending": "#a1a1aa"},
    syntax=[("Comment", "#9ca3af", True), ("Literal.String", "#86efac", False),
            ("Literal.Number", "#fdba74", False), ("Keyword", "#c4b5fd", False),
            ("Name.Builtin", "#67e8f9", False), ("Name.Function", "#93c5fd", False),
            ("Name.Class", "#93c5fd", False), ("Name.Decorator", "#fdba74", False),
            ("Operator.Word", "#c4b5fd", False), ("Generic.Inserted", "#86efac", False),
            ("Generic.Deleted", "#fca5a5", False)],
)

_current = LIGHT


def current() -> Palette:
    return _current


def system_is_dark() -> bool:
    hints = QGuiApplication.styleHints()
    return hints is not None and hints.colorScheme() == Qt.ColorScheme.Dark


def resolve(scheme: str | None) -> Palette:
    """The palette a Theme setting means ("system" or None: the desktop's scheme)."""
    if scheme == "dark":
        return DARK
    if scheme == "light":
        return LIGHT
    return DARK if system_is_dark() else LIGHT


def apply(app: QApplication, scheme: str | None) -> Palette:
    """Use the palette `scheme` means: Qt's own widgets and every sheet of ours."""
    global _current
    _current = resolve(scheme)
    app.setStyle("Fusion")  # one look on every desktop, following the palette below
    app.setPalette(_qt_palette(_current))
    app.setPalette(_box_palette(_current), "QCheckBox")  # type: ignore[arg-type]  # str works
    app.setStyleSheet(stylesheet(_current))
    return _current


def _qt_palette(p: Palette) -> QPalette:
    if p.name == "light":
        style = QApplication.style()
        return style.standardPalette() if style is not None else QPalette()
    q = QPalette()
    R = QPalette.ColorRole  # a short alias for the many roles
    for role, colour in ((R.Window, "#202024"), (R.WindowText, p.text), (R.Base, "#18181b"),
                         (R.AlternateBase, "#232327"), (R.Text, p.text), (R.Button, "#2a2a2f"),
                         (R.ButtonText, p.text), (R.ToolTipBase, "#2a2a2f"),
                         (R.ToolTipText, p.text), (R.Highlight, "#2f5fb3"),
                         (R.HighlightedText, "#ffffff"), (R.Link, p.link),
                         (R.PlaceholderText, p.faint), (R.BrightText, "#ffffff")):
        q.setColor(role, QColor(colour))
    for role in (R.WindowText, R.Text, R.ButtonText):
        q.setColor(QPalette.ColorGroup.Disabled, role, QColor("#6b6b73"))
    return q


def _box_palette(p: Palette) -> QPalette:
    """A check box's: Fusion draws its edge a shade darker than the window, which is invisible
    on a dark one, so there the edge is drawn from a light grey (and the box filled lighter)."""
    q = _qt_palette(p)
    if p.name == "dark":
        q.setColor(QPalette.ColorRole.Window, QColor("#b4b4bc"))
        q.setColor(QPalette.ColorRole.Base, QColor("#2c2c32"))
    return q


def stylesheet(p: Palette) -> str:
    """The application's one style sheet."""
    problem, info = p.notices["problem"], p.notices["info"]
    return f"""
QAbstractItemView#transcript {{ background: {p.base}; border: none; }}
QLabel#welcome {{ padding: 40px 80px; color: {p.muted}; background: {p.base}; }}
QLabel#banner {{ background: {p.banner[0]}; color: {p.banner[1]}; padding: 8px 12px;
                 border-bottom: 1px solid {p.banner[2]}; }}
QWidget#notice[kind="problem"] {{ background: {problem[0]};
                                  border-bottom: 1px solid {problem[1]}; }}
QWidget#notice[kind="problem"] QLabel {{ color: {problem[2]}; }}
QWidget#notice[kind="info"] {{ background: {info[0]}; border-bottom: 1px solid {info[1]}; }}
QWidget#notice[kind="info"] QLabel {{ color: {info[2]}; }}
QLabel#hint {{ color: {p.error_text}; }}
QFrame#local_servers {{ background: {info[0]}; border: 1px solid {info[1]};
                        border-radius: 4px; }}
QFrame#local_servers QLabel {{ color: {info[2]}; }}
QLabel#held {{ background: {p.chip[0]}; border: 1px solid {p.chip[1]}; border-radius: 4px;
               padding: 3px 8px; }}
QToolButton#chip {{ background: {p.chip[0]}; border: 1px solid {p.chip[1]};
                   border-radius: 4px; padding: 3px 8px; }}
QLabel#editing {{ background: {p.editing[0]}; border: 1px solid {p.editing[1]};
                  border-radius: 4px; padding: 3px 8px; }}
QToolButton#mode_button {{ padding: 3px 10px; border: 1px solid {p.border}; }}
QToolButton#mode_button:checked {{ background: {p.accent}; color: white; }}
QWidget#todo {{ background: {p.todo[0]}; border-top: 1px solid {p.todo[1]}; }}
QLabel[role="muted"] {{ color: {p.muted}; }}
QLabel[role="faint"] {{ color: {p.faint}; }}
QLabel[role="accent"] {{ color: {p.link}; }}
QLabel[role="error"] {{ color: {p.error_text}; }}
"""
