import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { applyFaultsPatch, noFaults } from './sim-faults.js';
import { parseSimArgs, simUsage } from './sim-options.js';

describe('parseSimArgs', () => {
  it('has the documented defaults', () => {
    const o = parseSimArgs([]);
    assert.equal(o.port, 8001);
    assert.equal(o.host, '127.0.0.1');
    assert.equal(o.name, null);
    assert.equal(o.model, 'sim-model');
    assert.equal(o.blockSize, 16);
    assert.equal(o.kvBlocks, 4096);
    assert.equal(o.outputTokens, 16);
    assert.equal(o.maxRunning, 0);
    assert.equal(o.itlMs, 0);
    assert.equal(o.itlJitterMs, 0);
    assert.deepEqual(o.faults, noFaults());
    assert.deepEqual(o.lora, []);
  });

  it('reads LoRA adapter names from --lora a,b', () => {
    assert.deepEqual(parseSimArgs(['--lora', 'sql, chat-v2']).lora, ['sql', 'chat-v2']);
  });

  it('reads values in both --flag value and --flag=value forms', () => {
    const o = parseSimArgs(['--port=0', '--name', 'r1', '--itl-ms', '2.5', '--startup-delay=1.5', '--max-running', '4']);
    assert.equal(o.port, 0);
    assert.equal(o.name, 'r1');
    assert.equal(o.itlMs, 2.5);
    assert.equal(o.startupDelayMs, 1500);
    assert.equal(o.maxRunning, 4);
  });

  it('reads --itl-jitter-ms up to --itl-ms, whichever flag comes first', () => {
    assert.equal(parseSimArgs(['--itl-jitter-ms', '10', '--itl-ms', '30']).itlJitterMs, 10);
    assert.equal(parseSimArgs(['--itl-ms=30', '--itl-jitter-ms=30']).itlJitterMs, 30);
  });

  it('--slowdown F multiplies every timing by F, whichever flag comes first, and refuses F <= 0', () => {
    const o = parseSimArgs(['--slowdown', '4', '--ttft-base-ms', '5', '--prefill-ms-per-token=0.5', '--itl-ms', '5', '--itl-jitter-ms', '2']);
    assert.deepEqual([o.ttftBaseMs, o.prefillMsPerToken, o.itlMs, o.itlJitterMs, o.slowdown], [20, 2, 20, 8, 4]);
    assert.equal(parseSimArgs(['--itl-ms', '5', '--slowdown=4']).itlMs, 20);
    assert.equal(parseSimArgs(['--itl-ms', '5']).itlMs, 5);
    assert.throws(() => parseSimArgs(['--slowdown', '0']), /--slowdown: "0" is not a number > 0/);
  });

  it('accepts a pypto_serving.cli argv tail', () => {
    const o = parseSimArgs([
      '--model',
      '/models/qwen',
      '--devices',
      '0,1',
      '--host',
      '0.0.0.0',
      '--port',
      '8003',
      '--show-startup-logs',
      '--served-model-name',
      'qwen',
    ]);
    assert.equal(o.model, '/models/qwen');
    assert.equal(o.devices, '0,1');
    assert.equal(o.host, '0.0.0.0');
    assert.equal(o.port, 8003);
    assert.equal(o.showStartupLogs, true);
    assert.equal(o.servedModelName, 'qwen');
  });

  it('turns fault flags into initial faults', () => {
    const o = parseSimArgs([
      '--port',
      '9000',
      '--fault-status',
      '502',
      '--fault-hang',
      'body',
      '--fault-die-after-chunks',
      '3',
      '--fault-reset-after-chunks',
      '1',
      '--fault-slow-ms',
      '20',
      '--fault-health',
      'not_ready',
      '--fault-refuse',
      '--fault-refuse-ms',
      '500',
    ]);
    assert.deepEqual(o.faults, {
      status: 502,
      hang: 'body',
      die_after_chunks: 3,
      reset_after_chunks: 1,
      slow_ms: 20,
      health: 'not_ready',
      refuse: true,
      refuse_ms: 500,
      external_waiting: 0,
      metrics_hang: false,
      models_list: 'ok',
    });
  });

  const errors: [string[], RegExp][] = [
    [['--bogus'], /unknown flag --bogus/],
    [['--bogus=1'], /unknown flag --bogus/],
    [['stray'], /unexpected argument "stray"/],
    [['--port'], /--port needs a value/],
    [['--port', '--name', 'x'], /--port needs a value/],
    [['--port', 'abc'], /--port: "abc" is not an integer in 0\.\.65535/],
    [['--port', '70000'], /--port: "70000" is not an integer in 0\.\.65535/],
    [['--block-size', '0'], /--block-size: "0" is not an integer >= 1/],
    [['--itl-ms', '-1'], /--itl-ms: "-1" is not a number >= 0/],
    [['--itl-jitter-ms', '-1'], /--itl-jitter-ms: "-1" is not a number >= 0/],
    [['--itl-ms', '5', '--itl-jitter-ms', '6'], /--itl-jitter-ms: 6 exceeds --itl-ms 5/],
    [['--itl-jitter-ms', '1'], /--itl-jitter-ms: 1 exceeds --itl-ms 0/],
    [['--output-tokens', '1.5'], /--output-tokens: "1\.5" is not an integer >= 1/],
    [['--show-startup-logs=yes'], /--show-startup-logs takes no value/],
    [['--name', ''], /--name: must not be empty/],
    [['--lora', 'a,,b'], /--lora: "a,,b" is not a comma-separated list of names \(an entry is empty\)/],
    [['--lora', 'a,a'], /--lora: "a" is listed twice/],
    [['--tls-cert', 'c.pem'], /--tls-cert and --tls-key must be given together/],
    [['--fault-hang', 'sometimes'], /--fault-hang: hang must be "headers", "body" or null/],
    [['--fault-status', '200'], /--fault-status: "200" is not an integer in 400\.\.599/],
    [['--fault-health', 'sick'], /--fault-health: health must be "ok" or "not_ready"/],
    [['--fault-refuse'], /--fault-refuse needs an explicit non-zero --port/],
    [['--fault-refuse', '--port', '0'], /--fault-refuse needs an explicit non-zero --port/],
  ];
  for (const [argv, message] of errors) {
    it(`refuses ${argv.join(' ')}`, () => {
      assert.throws(() => parseSimArgs(argv), { name: 'SimArgsError', message });
    });
  }

  it('lists every flag in the usage text', () => {
    for (const flag of ['--port', '--tls-key', '--fault-refuse-ms', '--max-running']) assert.match(simUsage(), new RegExp(flag));
  });
});

describe('applyFaultsPatch', () => {
  it('merges a partial patch and leaves the rest', () => {
    const a = applyFaultsPatch(noFaults(), { status: 503 });
    const b = applyFaultsPatch(a, { slow_ms: 10 });
    assert.equal(b.status, 503);
    assert.equal(b.slow_ms, 10);
  });

  it('clears everything with reset before applying the other keys', () => {
    const a = applyFaultsPatch(noFaults(), { status: 503, hang: 'headers' });
    assert.deepEqual(applyFaultsPatch(a, { reset: true }), noFaults());
    assert.deepEqual(applyFaultsPatch(a, { reset: true, slow_ms: 5 }), { ...noFaults(), slow_ms: 5 });
  });

  it('refuses unknown keys and bad values without changing anything', () => {
    const start = noFaults();
    assert.throws(() => applyFaultsPatch(start, { status: 503, explode: true }), /unknown fault "explode"/);
    assert.throws(() => applyFaultsPatch(start, { die_after_chunks: -1 }), /die_after_chunks must be a non-negative integer/);
    assert.throws(() => applyFaultsPatch(start, { refuse: 'yes' }), /refuse must be a boolean/);
    assert.throws(() => applyFaultsPatch(start, [1]), /faults must be a JSON object/);
    assert.deepEqual(start, noFaults());
  });
});
