// What the HTTP tests compare of a response: its status and rate limit fields.

export function fields(res: Response) {
  return {
    status: res.status,
    policy: res.headers.get('ratelimit-policy'),
    limit: res.headers.get('ratelimit'),
    retryAfter: res.headers.get('retry-after'),
  };
}
