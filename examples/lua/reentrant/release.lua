-- reentrant, release: Redisson's unlockInnerAsync. One hold less; at zero the lock is
-- deleted and the unlock message published on Redisson's channel to wake waiters.
-- KEYS[1] the lock; ARGV[1] the owner; ARGV[2] the ttl in ms.
-- Redisson answers nil (not ours), 0 (still held: nested) or 1 (released); lockaudit's
-- convention says 0 for not ours and 1 for both releases.
if (redis.call('hexists', KEYS[1], ARGV[1]) == 0) then
    return 0;
end;
local counter = redis.call('hincrby', KEYS[1], ARGV[1], -1);
if (counter > 0) then
    redis.call('pexpire', KEYS[1], ARGV[2]);
else
    redis.call('del', KEYS[1]);
    redis.call('publish', 'redisson_lock__channel:{' .. KEYS[1] .. '}', 0);
end;
return 1;
