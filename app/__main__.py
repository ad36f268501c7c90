from app.cli import run

raise SystemExit(run())
