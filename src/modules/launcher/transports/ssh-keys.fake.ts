/**
 * Fresh ed25519 key pairs for ssh tests.
 *
 * `ssh2.utils.generateKeyPairSync('ed25519')` in ssh2 1.17.0 emits a malformed pair about once in
 * 150 calls (a public key whose leading zero byte was dropped: 31 bytes instead of 32, and a
 * private key its own parser refuses). A test that generates a few keys per run then fails about
 * once in 50 runs with "Malformed OpenSSH public key". Regenerate until both halves parse.
 */
import ssh2 from 'ssh2';

export interface KeyPair {
  readonly public: string;
  readonly private: string;
}

export function ed25519KeyPair(): KeyPair {
  for (let attempt = 0; attempt < 100; attempt++) {
    const pair = ssh2.utils.generateKeyPairSync('ed25519');
    if (!(ssh2.utils.parseKey(pair.public) instanceof Error) && !(ssh2.utils.parseKey(pair.private) instanceof Error)) {
      return pair;
    }
  }
  throw new Error('ssh2 produced 100 malformed ed25519 key pairs in a row');
}
