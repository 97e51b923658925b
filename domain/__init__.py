"""The domain: everything a stack promises, computed without Pulumi, one subpackage per concern. Import
floors, lowest first (tests/test_imports.py): problems < upstream < time < capacity < cost < stack."""
