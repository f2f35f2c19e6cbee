import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsBoolean, IsInt, IsOptional, IsString, Length, Matches, Max, Min } from 'class-validator';
import { NAME_PATTERN } from '../../../config/config.rules.js';

export class LaunchReplicasDto {
  @ApiPropertyOptional({ example: 1, minimum: 1, maximum: 64, default: 1, description: 'how many replicas to launch (all or none)' })
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(64)
  readonly count?: number;

  @ApiPropertyOptional({ example: 'node', description: 'launch only on this config-declared host' })
  @IsOptional()
  @IsString()
  @Matches(NAME_PATTERN, { message: 'host must be a host name declared in the config' })
  readonly host?: string;

  @ApiPropertyOptional({ example: 'llama-8b', description: 'launch on a host serving this model (its served_model_name, else its model); 404 when none does' })
  @IsOptional()
  @IsString()
  @Length(1, 512)
  readonly model?: string;
}

export class PatchReplicaDto {
  @ApiProperty({ example: true, description: 'true: out of rotation (pins released, nothing stopped); false: back in rotation' })
  @IsBoolean()
  readonly draining!: boolean;
}
