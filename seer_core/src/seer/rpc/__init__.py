"""Calling the ``@expose`` functions of an interface file served from a sandbox.

``ScopedSandbox.serve("interface.py")`` starts an RPC server in the sandbox
(:mod:`seer.runtime.rpc_server`) and describes it as a :class:`ServedInterface`; an expose mode
turns that into what the agent gets. Underneath, any process holding the URL and token can call
the functions::

    from seer.rpc import RpcClient

    client = RpcClient(url, token)
    client.call("get_activations", "The cat sat", layer=3)

* :mod:`seer.rpc.spec`: :class:`FunctionSpec` / :class:`ParamSpec`, read from the interface file
  with :mod:`ast` (:func:`inspect_interface` also checks it);
* :mod:`seer.rpc.wire`: the wire format (msgpack; NumPy arrays and torch tensors out of band,
  dtype and shape kept) with :func:`serialize` / :func:`deserialize`;
* :mod:`seer.rpc.client`: :class:`RpcClient` and :class:`ServedInterface`.

See docs/scoped.md.
"""

from seer.errors import (
    BadArgumentsError,
    InterfaceError,
    InterfaceLoadError,
    RemoteError,
    RequestTooLargeError,
    RpcAuthError,
    RpcConnectionError,
    RpcError,
    RpcTimeoutError,
    SerializationError,
    UnknownFunctionError,
)
from seer.rpc.client import RpcClient, ServedInterface
from seer.rpc.spec import FunctionSpec, InterfaceInfo, ParamSpec, inspect_interface
from seer.rpc.wire import deserialize, serialize

__all__ = [
    "BadArgumentsError",
    "FunctionSpec",
    "InterfaceError",
    "InterfaceInfo",
    "InterfaceLoadError",
    "ParamSpec",
    "RemoteError",
    "RequestTooLargeError",
    "RpcAuthError",
    "RpcClient",
    "RpcConnectionError",
    "RpcError",
    "RpcTimeoutError",
    "SerializationError",
    "ServedInterface",
    "UnknownFunctionError",
    "deserialize",
    "inspect_interface",
    "serialize",
]
