"""Names hosts and tenants imported before issue 27 moved their modules."""

from __future__ import annotations


def test_receipts__the_verifier_functions_are_importable_from_the_package():
    import retention.receipts as package
    from retention.receipts import cli, verify

    assert package.verify_receipt is verify.verify_receipt
    assert package.signed_head_check is verify.signed_head_check
    assert package.receipt_signed_head_problems is verify.receipt_signed_head_problems
    assert package.main is cli.main


def test_rest__the_deletions_module_keeps_its_old_path():
    from retention.rest import apis, deletions

    assert apis.PolicyRefSerializer is deletions.PolicyRefSerializer
    assert apis.DeletionListApi is deletions.DeletionListApi
    assert apis.DeletionReportApi is deletions.DeletionReportApi
