"""The bad-input corpus and the contract every gpufair command keeps on it."""
