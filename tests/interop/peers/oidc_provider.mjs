// A real authorization server for the OAuth interop tests: npm `oidc-provider` (panva's
// certified OpenID provider, installed by `make peers` into .peers/oidc-provider-<version>/),
// configured as the MCP authorization spec expects of one (the tests that use it:
// tests/interop/test_interop_oauth.py):
//
//   - dynamic client registration (RFC 7591), open (no initial access token);
//   - PKCE S256, required of every client;
//   - resource indicators (RFC 8707): the one resource given by --resource gets JWT access
//     tokens (RFC 9068) with `aud` = that resource and its scope `mcp`; any other resource is
//     refused (invalid_target);
//   - client_credentials, for the pre-registered client of --service-client (JSON);
//   - rotating refresh tokens (each refresh returns a new one and spends the old one);
//   - revocation and introspection;
//   - the development interactions: a login form, a consent form and an abort link, so that a
//     test's scripted "person" can sign in, consent or refuse with plain HTTP requests.
//
// The access-token lifetime is --access-ttl seconds, or N for a client whose client_name
// contains `access-ttl=N` (a test asks for short-lived tokens through its OAuth(client_name=)).
// Signing keys are made afresh at each start and every artifact (clients, grants, tokens) is
// in memory: a restarted provider has forgotten every registration and refuses the tokens it
// issued before, as a real server that expired a registration and rotated its keys would.
//
// Each event a test may wait for is one JSON line on stdout ({"event": ..., ...}); no token,
// code or secret is ever printed. Usage:
//
//   node oidc_provider.mjs --module <path to oidc-provider/lib/index.js> --port N \
//       --resource http://127.0.0.1:M/mcp [--access-ttl 600] [--service-client '{...}']

import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({
  options: {
    module: { type: 'string' },
    port: { type: 'string' },
    resource: { type: 'string' },
    'access-ttl': { type: 'string', default: '600' },
    'service-client': { type: 'string', multiple: true, default: [] },
  },
});
if (!args.module || !args.port || !args.resource) {
  console.error('usage: oidc_provider.mjs --module PATH --port N --resource URL');
  process.exit(2);
}

// The package lives under .peers/, not next to this file: imported by its path.
const { default: Provider, errors } = await import(pathToFileURL(args.module).href);

const issuer = `http://127.0.0.1:${args.port}`;
const resource = args.resource;
const defaultTtl = Number(args['access-ttl']);
const RESOURCE_SCOPE = 'mcp';

function log(event, fields = {}) {
  process.stdout.write(`${JSON.stringify({ event, ...fields })}\n`);
}

function accessTtl(client) {
  const match = /access-ttl=(\d+)/.exec(client?.clientName ?? '');
  return match ? Number(match[1]) : defaultTtl;
}

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: 'jwk' }), use: 'sig', alg: 'RS256' };

const configuration = {
  clients: args['service-client'].map((text) => JSON.parse(text)),
  jwks: { keys: [signingKey] },
  cookies: { keys: [randomBytes(32).toString('hex')] },
  // Plain OAuth 2.0 scopes of the provider itself; `mcp` belongs to the resource (below).
  scopes: ['openid', 'offline_access'],
  pkce: { required: () => true },
  rotateRefreshToken: true,
  features: {
    devInteractions: { enabled: true },
    registration: { enabled: true },
    clientCredentials: { enabled: true },
    revocation: { enabled: true },
    introspection: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: (_ctx, _client, oneOf) => oneOf,
      getResourceServerInfo(_ctx, indicator, client) {
        if (indicator !== resource) {
          throw new errors.InvalidTarget(`unknown resource ${indicator}`);
        }
        return {
          scope: RESOURCE_SCOPE,
          audience: resource,
          accessTokenTTL: accessTtl(client),
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'RS256' } },
        };
      },
    },
  },
  ttl: {
    AccessToken: (_ctx, token, client) => token.resourceServer?.accessTokenTTL ?? accessTtl(client),
    ClientCredentials: (_ctx, token, client) =>
      token.resourceServer?.accessTokenTTL ?? accessTtl(client),
    Grant: 3600,
    IdToken: 3600,
    Interaction: 600,
    RefreshToken: 3600,
    Session: 3600,
  },
};

const provider = new Provider(issuer, configuration);

// What the tests watch: who registered, which grants were issued or refused, and how an
// authorization ended. Client ids are not secrets; tokens and secrets are never printed.
provider.on('registration_create.success', (_ctx, client) => {
  log('registered', {
    client_id: client.clientId,
    client_name: client.clientName ?? null,
    redirect_uris: client.redirectUris ?? [],
  });
});
provider.on('grant.success', (ctx) => {
  log('token', {
    grant_type: ctx.oidc.params.grant_type,
    client_id: ctx.oidc.client?.clientId ?? null,
    resource: ctx.oidc.params.resource ?? null,
  });
});
provider.on('grant.error', (ctx, err) => {
  log('token_error', {
    grant_type: ctx.oidc.params?.grant_type ?? null,
    client_id: ctx.oidc.client?.clientId ?? null,
    error: err.error ?? String(err.name),
  });
});
provider.on('authorization.error', (ctx, err) => {
  log('authorization_error', {
    client_id: ctx.oidc.client?.clientId ?? null,
    error: err.error ?? String(err.name),
  });
});
provider.on('authorization.success', (ctx) => {
  log('authorized', { client_id: ctx.oidc.client?.clientId ?? null });
});
provider.on('server_error', (_ctx, err) => {
  log('server_error', { error: String(err?.message ?? err) });
});

const server = provider.listen(Number(args.port), '127.0.0.1', () => {
  log('listening', { issuer, port: Number(args.port) });
});

for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => server.close(() => process.exit(0)));
}
