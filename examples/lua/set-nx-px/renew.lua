-- set-nx-px, renew (the optional watchdog): compare-and-PEXPIRE.
-- KEYS[1] the lock; ARGV[2] the ttl in ms; ARGV[3] the hold's value.
-- Returns 1 (extended by the ttl) or 0 (not ours).
if redis.call('get', KEYS[1]) == ARGV[3] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
else
  return 0
end
