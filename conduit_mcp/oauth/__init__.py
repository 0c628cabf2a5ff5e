"""OAuth 2.1 for HTTP MCP servers: the library the OAuth actor drives.

Nothing here is an actor and nothing blocks: the pure modules (``challenge``, ``flow``, the
URL rules of ``discovery``, the token-set math of ``tokens``) are plain functions, and the
async ones take an ``aiohttp.ClientSession`` and run on whatever loop awaits them (the
client's I/O loop). ``config`` (the public ``OAuth``) and ``store`` import nothing heavy;
the others need the ``oauth`` extra (authlib), which builds and checks PKCE, client
authentication, JWT assertions and metadata. Written here by hand: RFC 9728 protected
resource metadata, the ``WWW-Authenticate`` parser, the discovery order, RFC 9207 ``iss``
checks, the scope rules and the stores (docs/oauth.md).
"""
