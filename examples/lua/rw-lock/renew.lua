-- rw-lock, renew (the write lock): RedissonLock's watchdog (renewExpirationAsync), which the
-- write lock inherits, every ttl/3 while held.
-- KEYS[1] the lock; ARGV[1] the owner; ARGV[2] the ttl in ms.
-- Returns 1 (extended by the ttl) or 0 (not ours any more).
if (redis.call('hexists', KEYS[1], ARGV[1] .. ':write') == 1) then
    redis.call('pexpire', KEYS[1], ARGV[2]);
    return 1;
end;
return 0;
