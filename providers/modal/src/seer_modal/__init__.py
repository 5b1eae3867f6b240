"""seer-modal: seer on Modal. For now it holds the test kit, :mod:`seer_modal.testing`.

Nothing heavy is imported here: the modal SDK, grpclib and docker load only when the test kit
(or, later, the provider) is used.
"""
