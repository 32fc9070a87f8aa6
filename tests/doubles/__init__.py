"""Local doubles of remote services (real HTTP, real semantics) for the tests."""
