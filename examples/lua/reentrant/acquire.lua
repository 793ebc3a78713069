-- reentrant, acquire: Redisson's RLock (tryLockInnerAsync), a hash {owner: hold count}.
-- KEYS[1] the lock; ARGV[1] the owner; ARGV[2] the ttl in ms.
-- Taken when the lock is free or already ours (a nested acquire counts one more hold).
-- Redisson answers nil when taken and the holder's PTTL when not; lockaudit's convention
-- says 1 for taken and {0, pttl} for not taken (the PTTL is ignored).
if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[1]) == 1)) then
    redis.call('hincrby', KEYS[1], ARGV[1], 1);
    redis.call('pexpire', KEYS[1], ARGV[2]);
    return 1;
end;
return {0, redis.call('pttl', KEYS[1])};
