"""A task path published by earlier versions, kept so that tasks already in a
broker during an upgrade still run. New runs publish ``retention.tasks.run_dispatch``.

The one module of the services that imports the engine: its dotted path is
the contract, so it cannot move up; the layers contract names it.
"""

from __future__ import annotations

from retention import engine


def run_execute_queued(run_id: str, max_seconds: float | None = None) -> str:
    """Hand the run to a dispatcher, as ``retention.tasks.run_dispatch`` does."""
    return engine.run_arm(run_id=run_id)
