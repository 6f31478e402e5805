"""Shockwave (NSDI'23): a volatile Fisher market over a planning window."""
