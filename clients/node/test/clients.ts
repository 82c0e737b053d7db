// The Redis clients an app may pass, made against a test server: node-redis
// and ioredis, each with its offline queue left ON (their default), as an
// app would have them.

import { Cluster, Redis } from 'ioredis';
import { createClient, createCluster } from 'redis';
import { createClient as createClient4 } from 'redis4';
import { createClient as createClient6, createCluster as createCluster6 } from 'redis6';

import type { RedisCluster, RedisServer } from './servers.js';

export interface AppClient {
  client: unknown;
  close(): Promise<void>;
}

export const SINGLE: Record<string, (server: RedisServer) => Promise<AppClient>> = {
  'node-redis': async (server) => {
    const client = createClient({ url: server.url });
    client.on('error', () => {});
    await client.connect();
    return { client, close: async () => client.destroy() };
  },
  'node-redis v4': async (server) => {
    const client = createClient4({ url: server.url });
    client.on('error', () => {});
    await client.connect();
    return { client, close: async () => client.disconnect() };
  },
  'node-redis v6': async (server) => {
    const client = createClient6({ url: server.url });
    client.on('error', () => {});
    await client.connect();
    return { client, close: async () => client.destroy() };
  },
  ioredis: async (server) => {
    const client = new Redis(server.port, '127.0.0.1');
    client.on('error', () => {});
    return { client, close: async () => client.disconnect() };
  },
};

export const CLUSTER: Record<string, (cluster: RedisCluster) => Promise<AppClient>> = {
  'node-redis createCluster': async (cluster) => {
    const client = createCluster({ rootNodes: cluster.rootNodes.map((n) => ({ url: `redis://${n.host}:${n.port}` })) });
    client.on('error', () => {});
    await client.connect();
    return { client, close: async () => client.destroy() };
  },
  'node-redis v6 createCluster': async (cluster) => {
    const client = createCluster6({ rootNodes: cluster.rootNodes.map((n) => ({ url: `redis://${n.host}:${n.port}` })) });
    client.on('error', () => {});
    await client.connect();
    return { client, close: async () => client.destroy() };
  },
  'ioredis Cluster': async (cluster) => {
    const client = new Cluster(cluster.rootNodes);
    client.on('error', () => {});
    return { client, close: async () => client.disconnect() };
  },
};

/** The cluster clients again, signed in as an ACL user (password `secret`). */
export const CLUSTER_AS: Record<string, (cluster: RedisCluster, user: string) => Promise<AppClient>> = {
  'node-redis createCluster': async (cluster, user) => {
    const client = createCluster({ rootNodes: cluster.rootNodes.map((n) => ({ url: `redis://${n.host}:${n.port}` })), defaults: { username: user, password: 'secret' } });
    client.on('error', () => {});
    await client.connect();
    return { client, close: async () => client.destroy() };
  },
  'node-redis v6 createCluster': async (cluster, user) => {
    const client = createCluster6({ rootNodes: cluster.rootNodes.map((n) => ({ url: `redis://${n.host}:${n.port}` })), defaults: { username: user, password: 'secret' } });
    client.on('error', () => {});
    await client.connect();
    return { client, close: async () => client.destroy() };
  },
  'ioredis Cluster': async (cluster, user) => {
    const client = new Cluster(cluster.rootNodes, { redisOptions: { username: user, password: 'secret' } });
    client.on('error', () => {});
    return { client, close: async () => client.disconnect() };
  },
};
