"""Providers: the contract (:mod:`seer.providers.base`), the embedded local provider
(:mod:`seer.providers.local`) and what providers share (:mod:`seer.providers.wheel`, seer's
runtime as a wheel for machines of a provider's own).

A regular package (not a namespace one), so import contracts see the modules in it.
"""
