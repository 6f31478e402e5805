"""THEMIS (NSDI'20): finish-time fair auctions; the policy is in ``policy``."""
