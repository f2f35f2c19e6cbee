import { ApiProperty } from '@nestjs/swagger';
import { IsString, Matches } from 'class-validator';
import { NAME_PATTERN } from '../../../config/config.rules.js';

export class PinSessionDto {
  @ApiProperty({ example: 'node-d1', description: 'name of a routable replica to pin the session to' })
  @IsString()
  @Matches(NAME_PATTERN, { message: 'replica must be a replica name' })
  readonly replica!: string;
}

export class SessionView {
  @ApiProperty({ example: 'conv-42' }) readonly id!: string;
  @ApiProperty({ example: 'node-d0' }) readonly replica!: string;
  @ApiProperty({ example: '2026-12-02T16:00:00.000Z', description: 'last request of the session' }) readonly last_used!: string;
  @ApiProperty({ example: '2026-12-02T16:10:00.000Z', description: 'when the pin expires if idle' }) readonly expires_at!: string;
}

export class SessionCountsView {
  @ApiProperty({ example: 1234, description: 'live pins in the directory' }) readonly total!: number;
  @ApiProperty({ example: { 'node-d0': 600, 'node-d1': 634 }, description: 'live pins per replica' })
  readonly replicas!: Record<string, number>;
  @ApiProperty({ example: { lru: 0, ttl: 12 }, description: 'evictions since start, by cause' })
  readonly evictions!: { lru: number; ttl: number };
}
