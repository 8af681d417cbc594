// A real OpenID provider for tests/test_auth.py: the certified `oidc-provider` (npm), issuing
// JWT access tokens by client credentials for one resource (RFC 8707 resource indicators).
//
//   node provider.mjs PORT ISSUER KEYS_FILE
//
// KEYS_FILE holds the private JWKS: read if it exists (a second provider with another issuer
// then signs with the same keys, so only the issuer differs), else written. Admin endpoints
// for the tests, beside the provider's own:
//   POST /admin/rotate   a new signing key, first in the JWKS (the old one stays published)
//   GET  /admin/stats    requests per path since start ({"/jwks": n, ...})
//   GET  /admin/pem      the current signing key's public half, PEM (the key-confusion case)
// oidc-provider reads its keys once, at construction: a rotation builds a new Provider with
// the same issuer and clients and swaps it in, as a restarted provider would be.
import { createPublicKey, generateKeyPairSync, randomUUID } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import Provider from "oidc-provider";

const [port, issuer, keysFile] = process.argv.slice(2);
// The API's identifier: the audience tokens are minted for unless a client asks for another.
const API = "https://api.test";
// Seconds a token lives: "short" gets tokens that expire at once (the expired case).
const LIFETIME = { short: 1 };

function newKey() {
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  return { ...privateKey.export({ format: "jwk" }), kid: randomUUID(), alg: "RS256", use: "sig" };
}

let keys = existsSync(keysFile) ? JSON.parse(readFileSync(keysFile, "utf8")) : [newKey()];
writeFileSync(keysFile, JSON.stringify(keys));

function client(id, scope) {
  return {
    client_id: id,
    client_secret: `${id}-secret`,
    grant_types: ["client_credentials"],
    redirect_uris: [],
    response_types: [],
    scope,
  };
}

function build() {
  const provider = new Provider(issuer, {
    clients: [
      client("writer", "items:write items:read"),
      client("reader", "items:read"),
      client("short", "items:write"),
    ],
    jwks: { keys },
    scopes: ["openid", "items:write", "items:read"],
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => API,
        useGrantedResource: () => true,
        getResourceServerInfo: (ctx, resource, oidcClient) => ({
          scope: "items:write items:read",
          audience: resource,
          accessTokenTTL: LIFETIME[oidcClient.clientId] ?? 300,
          accessTokenFormat: "jwt",
          jwt: { sign: { alg: "RS256" } },
        }),
      },
    },
  });
  return provider.callback();
}

let handle = build();
const stats = {};

function json(res, status, body) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

const server = createServer((req, res) => {
  const path = new URL(req.url, issuer).pathname;
  if (path === "/admin/rotate" && req.method === "POST") {
    keys = [newKey(), ...keys];
    writeFileSync(keysFile, JSON.stringify(keys));
    handle = build();
    return json(res, 200, { kid: keys[0].kid });
  }
  if (path === "/admin/stats") return json(res, 200, stats);
  if (path === "/admin/pem") {
    res.writeHead(200, { "content-type": "text/plain" });
    return res.end(createPublicKey({ key: keys[0], format: "jwk" }).export({ type: "spki", format: "pem" }));
  }
  stats[path] = (stats[path] ?? 0) + 1;
  return handle(req, res);
});
server.listen(Number(port), "127.0.0.1", () => console.log(`listening on ${issuer}`));
process.on("SIGTERM", () => server.close(() => process.exit(0)));
