"""The guided demo behind `make demo`, one concern a module.

- ``seeds``: the seed tables (policies, uploads, accounts, request logs).
- ``formatting``: instants, lengths and lists as a person reads them.
- ``classes``: a data class's mode, version and rules, said in words.
- ``seed``: the seed step: users and policies, then the two seeders below,
  then legal holds, renewals and files removed by hand.
- ``seed_objects``: uploads (tracked files) and their summary.
- ``seed_rows``: rows of the host's own tables and their summary.
- ``enable``: the enable step, after the reviewed dry run.
- ``report``: the report step: the fate of every upload, then the checks.
- ``report_logs`` / ``report_accounts``: the fate of the request logs and the
  customer accounts, each with its check.
- ``checks``: a check's outcome, storage against the ledger, the verdict.

Only ``retention.api`` and ``retention.models`` are read (an import
contract in pyproject.toml says so), and nothing printed holds an object key.
"""
