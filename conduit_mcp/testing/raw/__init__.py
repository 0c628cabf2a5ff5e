"""Raw drivers, for tests below the client: newline JSON on stdio (:mod:`.stdio`,
``RawPeer``) and Streamable HTTP requests (:mod:`.http`, ``RawHttpPeer``)."""
