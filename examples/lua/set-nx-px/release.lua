-- set-nx-px, release: compare-and-delete, DEL only if the value is still this hold's.
-- KEYS[1] the lock; ARGV[3] the hold's value.
-- Returns 1 (released) or 0 (not ours: expired, or taken by another client).
if redis.call('get', KEYS[1]) == ARGV[3] then
  return redis.call('del', KEYS[1])
else
  return 0
end
