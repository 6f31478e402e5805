"""Gandiva_fair: split stride scheduling of user tickets, load balancing, GPU-type trading."""
