-- set-nx-px, acquire: the Redis documentation's single-instance lock.
-- KEYS[1] the lock; ARGV[2] the ttl in ms; ARGV[3] a fresh random value for this hold.
-- Returns OK (taken, lease = ttl) or false (nil: held by someone else).
return redis.call('set', KEYS[1], ARGV[3], 'NX', 'PX', ARGV[2])
