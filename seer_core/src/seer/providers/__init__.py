"""Providers: the contract (:mod:`seer.providers.base`: ``Provider``, ``Machine``, capabilities),
the provider kit (:mod:`seer.providers.kit`: what exec-based providers share), the embedded local
provider (:mod:`seer.providers.local`), and the small pieces every provider may use: seer's
runtime as a wheel for machines of a provider's own (:mod:`seer.providers.wheel`), the starting
client's watch (:mod:`seer.providers.starter`) and process liveness (:mod:`seer.providers.procs`).

A regular package (not a namespace one), so import contracts see the modules in it.
"""
